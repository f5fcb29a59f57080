"""A model file is opened by llama.cpp in a child process once, before Hearth's own process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.base.errors import LoadFailed
from engine.catalog import inspect_model
from engine.native.model_check import check_files, check_model_file, verdict_key
from tests.conftest import plan_for
from tests.engine.catalog.test_catalog import nul_inside_a_token


def test_a_file_that_aborts_llama_cpp_costs_only_the_child(tmp_path: Path, tiny_model: Path) -> None:
    bad = nul_inside_a_token(tiny_model, tmp_path / "nul.gguf")  # the catalog refuses it; llama.cpp aborts
    first, good, again = check_files([bad, tiny_model, bad])
    assert first.signal_name == "SIGABRT" and not first.ok
    assert first.message.startswith(
        "llama.cpp crashed (SIGABRT) opening nul.gguf, a damaged or unsupported file:"
    )
    assert "GGML_ASSERT(id_to_token.size() == token_to_id.size())" in first.message
    assert "\n" not in first.message
    assert good.ok, "the child that died did not take the next file with it"
    assert again.signal_name == "SIGABRT"


def test_a_clean_llama_cpp_refusal_is_its_own_words(tmp_path: Path, tiny_model: Path) -> None:
    from tests.conftest import rewrite_gguf

    broken = rewrite_gguf(tiny_model, tmp_path / "no-k.gguf", drop=("blk.0.attn_k.weight",))
    (verdict,) = check_files([broken])
    assert not verdict.ok and verdict.signal_name is None
    assert verdict.message == "llama.cpp could not load no-k.gguf: tensor 'blk.0.attn_k.weight' not found"


def test_the_verdict_is_remembered_per_header(tmp_path: Path, tiny_model: Path) -> None:
    cache = tmp_path / "verdicts.json"
    counter = tmp_path / "runs"
    code = f"import json; open({str(counter)!r}, 'a').write('x'); print(json.dumps({{'ok': True}}))"
    fake_child = [sys.executable, "-c", code]
    info = inspect_model(tiny_model)
    assert check_model_file(info, cache, fake_child).ok
    assert check_model_file(info, cache, fake_child).ok
    assert counter.read_text() == "x"
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(tiny_model.read_bytes())  # the same header elsewhere: no new check
    assert check_model_file(inspect_model(copy), cache, fake_child).ok
    assert counter.read_text() == "x"
    assert verdict_key(info) == verdict_key(inspect_model(copy))
    assert list(json.loads(cache.read_text())) == [verdict_key(info)]


def test_a_timeout_is_not_remembered(tmp_path: Path, tiny_model: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    (verdict,) = check_files([tiny_model], sleeper, timeout=1)
    assert not verdict.ok and "took longer than 1 s" in verdict.message
    assert not verdict.remembered


def test_the_executor_refuses_a_file_whose_check_crashed(
    tmp_path: Path, tiny_model: Path, monkeypatch
) -> None:
    """A remembered crash verdict stops the load before llama.cpp opens the file in-process."""
    from engine.loaded_model import Engine

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    info = inspect_model(tiny_model)
    verdicts = tmp_path / "cache" / "Hearth" / "model-verdicts.json"
    verdicts.parent.mkdir(parents=True)
    message = "llama.cpp crashed (SIGABRT) opening tiny-llama.gguf, a damaged or unsupported file"
    key = verdict_key(info)
    crash = {"key": key, "ok": False, "message": message, "signal_name": "SIGABRT", "seconds": 0.1}
    verdicts.write_text(json.dumps({key: crash}))
    with pytest.raises(LoadFailed) as failure:
        Engine.load(plan_for(tiny_model)).wait_ready(60)
    assert failure.value.message == message
