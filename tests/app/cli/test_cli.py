"""`hearth` on the command line: the same objects as the window, as text or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.commands import run_cli
from tests.conftest import SCRIPT_TEXT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_cli(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def chat_json(capsys: pytest.CaptureFixture[str], model: Path, prompt: str, *options: str) -> dict:
    """`hearth chat MODEL PROMPT OPTIONS --json --ctx 512`, which must succeed: its JSON."""
    code, out, _ = run(capsys, "chat", str(model), prompt, *options, "--json", "--ctx", "512")
    assert code == 0
    return json.loads(out)


def test_inspect_text(capsys, tiny_model: Path) -> None:
    code, out, _ = run(capsys, "inspect", str(tiny_model))
    assert code == 0
    assert "Architecture:" in out and "llama" in out
    assert "Chat template:" in out


def test_inspect_json(capsys, tiny_projector: Path) -> None:
    code, out, _ = run(capsys, "inspect", str(tiny_projector), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kind"] == "projector"
    assert data["projector"]["projection_dim"] == 64


def test_plan_text_and_json(capsys, tiny_model: Path) -> None:
    code, out, _ = run(capsys, "plan", str(tiny_model), "--ctx", "2048", "--parallel", "4")
    assert code == 0
    assert "fits" in out.lower()
    code, out, _ = run(capsys, "plan", str(tiny_model), "--ctx", "2048", "--parallel", "4", "--json")
    plan = json.loads(out)
    assert plan["params"]["n_ctx"] == 8192
    assert plan["params"]["n_seq_max"] == 4
    assert plan["verdict"] == "fits"
    assert [p for p in plan["phases"]][:2] == ["validate", "weights"]


def test_plan_with_memory_for_conversations(capsys, tiny_model: Path) -> None:
    args = ("plan", str(tiny_model), "--ctx", "2048", "--parallel", "8", "--kv-pool", "2048")
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "Context: 2,048 tokens shared by 8 conversations, each up to 2,048" in out
    plan = json.loads(run(capsys, *args, "--json")[1])
    assert (plan["params"]["n_ctx"], plan["params"]["kv_unified"]) == (2048, True)
    code, _, err = run(capsys, "plan", str(tiny_model), "--kv-pool", "10")
    assert code == 2 and "Memory for conversations must be at least 256" in err


def test_errors_go_to_stderr_with_a_nonzero_exit(capsys, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"definitely not a model")
    code, out, err = run(capsys, "inspect", str(bogus))
    assert code == 2
    assert out == ""
    assert err.startswith("hearth: ") and "not a GGUF" in err
    code, _, err = run(capsys, "plan", str(bogus))
    assert code == 2


def test_plan_refuses_a_projector_as_the_model(capsys, tiny_projector: Path) -> None:
    code, _, err = run(capsys, "plan", str(tiny_projector))
    assert code == 2
    assert "projector" in err


def test_hardware(capsys) -> None:
    code, out, _ = run(capsys, "hardware")
    assert code == 0
    assert out.startswith("CPU:")
    code, out, _ = run(capsys, "hardware", "--json")
    assert json.loads(out)["logical_cores"] >= 1


def test_chat_streams_the_reply(capsys, scripted_model: Path) -> None:
    code, out, err = run(capsys, "chat", str(scripted_model), "hello", "--temp", "0", "--ctx", "512")
    assert code == 0
    assert out == SCRIPT_TEXT + "\n"
    assert "stop token" in err


def test_chat_json(capsys, scripted_model: Path) -> None:
    data = chat_json(capsys, scripted_model, "hello", "--temp", "0", "--max-tokens", "3")
    assert data["text"] == "é a"
    assert data["stop_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 3
    assert data["timings"]["ttft"] > 0


def test_chat_refuses_bad_settings(capsys, scripted_model: Path) -> None:
    code, _, err = run(capsys, "chat", str(scripted_model), "hi", "--temp", "-1")
    assert code == 2
    assert "Temperature" in err


def test_setup_default_model_is_idempotent(
    capsys, tmp_path: Path, qwen_path: Path, qwen_draft_path: Path
) -> None:
    """`make run` sets up the instruction-tuned chat model, not the base Gemma, and its draft."""
    models = tmp_path / "models"
    where = ("--data-dir", str(tmp_path), "--models-dir", str(models))
    code, out, _ = run(capsys, *where, "setup-default-model")
    assert code == 0
    target, draft = models / qwen_path.name, models / qwen_draft_path.name
    assert target.stat().st_size == qwen_path.stat().st_size
    assert draft.stat().st_size == qwen_draft_path.stat().st_size and f"Its draft model ready: {draft}" in out
    mtimes = target.stat().st_mtime_ns, draft.stat().st_mtime_ns
    run(capsys, *where, "setup-default-model")
    assert (target.stat().st_mtime_ns, draft.stat().st_mtime_ns) == mtimes  # not assembled twice


def test_chat_with_an_image(capsys, tiny_model: Path, tiny_projector: Path, tmp_path: Path) -> None:
    from PIL import Image

    picture = tmp_path / "red.png"
    Image.new("RGB", (32, 32), (200, 10, 10)).save(picture)
    data = chat_json(
        capsys, tiny_model, "what is this?", "--mmproj", str(tiny_projector), "--image", str(picture),
        "--max-tokens", "3",
    )  # fmt: skip
    assert data["usage"]["images"] == 1


def test_chat_image_refusals_match_the_engine(
    capsys, tiny_model: Path, tiny_projector: Path, tmp_path: Path
) -> None:
    text = tmp_path / "notes.png"
    text.write_text("not pixels")
    code, _, err = run(capsys, "chat", str(tiny_model), "hi", "--image", str(text))
    assert code == 2 and "--mmproj" in err
    code, _, err = run(
        capsys, "chat", str(tiny_model), "hi", "--mmproj", str(tiny_projector), "--image", str(text)
    )
    assert code == 2 and "not an image" in err


def test_chat_with_prompt_lookup(capsys, scripted_model: Path) -> None:
    data = chat_json(capsys, scripted_model, "hello", "--temp", "0", "--speculate", "lookup")
    assert data["text"] == SCRIPT_TEXT


def test_bench_with_speculation_reports_drafts(capsys, looping_model: Path) -> None:
    code, out, _ = run(
        capsys, "bench", str(looping_model), "--speculate", "lookup", "--draft-max", "4",
        "--tokens", "24", "--repeats", "1", "--json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert data["repeat"]["drafted"] > 0
    assert "accepted" in data["novel"] and data["repeat"]["same_text"]


def test_draft_max_needs_speculate(capsys, tiny_model: Path) -> None:
    code, _, err = run(capsys, "chat", str(tiny_model), "hi", "--draft-max", "4")
    assert code == 2 and "--speculate" in err


def test_output_to_a_closed_pipe_ends_quietly(tiny_model: Path, tmp_path: Path) -> None:
    """`hearth plan ... --json | head -1`: no BrokenPipeError traceback."""
    import os
    import subprocess
    import sys

    # The reader is gone before the first write, so the pipe breaks every time: with `| head -1`
    # the 4 KB of JSON often fit the pipe's buffer before head closed it, and nothing broke.
    read, write = os.pipe()
    os.close(read)
    command = [sys.executable, "-m", "app", "--data-dir", str(tmp_path), "plan", str(tiny_model), "--json"]
    try:
        result = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert result.returncode == 141  # 128 + SIGPIPE: the broken pipe was met, and handled
