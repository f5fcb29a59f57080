"""The default chat model: assembled once from its chunk packages, hash-checked."""

from __future__ import annotations

from pathlib import Path

import pytest

import app.chat_model as chat_model


def test_parts_that_do_not_add_up_are_refused_and_leave_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = []
    for n in range(3):
        part = tmp_path / f"part{n}.bin"
        part.write_bytes(bytes([n]) * 1000)
        parts.append(part)
    monkeypatch.setattr(chat_model, "chunk_paths", lambda: parts)
    models = tmp_path / "models"
    with pytest.raises(chat_model.ChatModelUnavailable, match="do not add up"):
        chat_model.ensure_chat_model(models)
    assert list(models.iterdir()) == []


def test_assembled_once_then_reused(tmp_path: Path, qwen_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    target = chat_model.ensure_chat_model(tmp_path, lambda done, total: seen.append((done, total)))
    assert target.stat().st_size == qwen_path.stat().st_size
    assert seen[-1][0] == seen[-1][1] and len(seen) <= 101  # one line per percent at most
    mtime = target.stat().st_mtime_ns
    assert chat_model.ensure_chat_model(tmp_path) == target
    assert target.stat().st_mtime_ns == mtime
    target.write_bytes(b"replaced")  # a different file under the name is assembled again
    assert chat_model.ensure_chat_model(tmp_path).stat().st_size == qwen_path.stat().st_size
