"""What comes into the engine from outside is checked once, at the boundary, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base.errors import InvalidChatRequest, LoadFailed
from engine.chat import ChatMessage, Role, clean_text
from engine.native.llama_log import LogLevel, LogLine, most_specific_error
from engine.requests.request import ChatRequest
from tests.conftest import plan_for, rewrite_gguf

REPO = Path(__file__).resolve().parents[3]


def test_lone_surrogates_become_replacement_characters():
    # 'caf\udce9' is how Python hands over the argument b"caf\xe9" (surrogateescape)
    assert ChatMessage("user", "caf\udce9").text == "caf\ufffd"
    assert ChatMessage(Role.SYSTEM, "\ud800a\udfffb").text == "\ufffda\ufffdb"
    assert ChatMessage("user", "plain ascii").text == "plain ascii"
    assert ChatMessage("user", "héllo 你好 🙂").text == "héllo 你好 🙂"  # valid text untouched


def test_request_text_fields_are_cleaned_too():
    request = ChatRequest(prompt="\udcff", assistant_prefix="ok\ud83d", stop=("\udc80",), owner="\udce9")
    assert request.prompt == "\ufffd"
    assert request.assistant_prefix == "ok\ufffd"
    assert request.stop == ("\ufffd",)
    assert request.owner == "\ufffd"
    for text in (request.prompt, request.assistant_prefix, *request.stop):
        text.encode("utf-8")  # never raises now


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ChatMessage("user", None), "The user message must be text, not nothing."),
        (lambda: ChatMessage("assistant", b"bytes"), "The assistant message must be text, not bytes."),
        (
            lambda: ChatMessage("robot", "hi"),
            "Unknown message role 'robot': use system, user, assistant, tool.",
        ),
        (lambda: ChatRequest(prompt=3), "The prompt must be text, not int."),
        (lambda: ChatRequest(prompt="x", stop=(None,)), "A stop string must be text, not nothing."),
    ],
)
def test_wrong_types_and_roles_are_typed_one_line_errors(make, message):
    with pytest.raises(InvalidChatRequest) as info:
        make()
    assert info.value.message == message


def test_clean_text_is_cheap_for_ascii():
    text = "a" * 10_000
    assert clean_text(text, "x") is text


def run_hearth(*args: bytes | str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    argv = [os.fsencode(a) if isinstance(a, str) else a for a in args]
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"app", *argv], cwd=REPO, capture_output=True, timeout=timeout
    )


def test_cli_prompts_that_are_not_utf8_are_served_without_a_traceback(tmp_path: Path, tiny_model: Path):
    data = ["--data-dir", str(tmp_path / "data")]
    for extra in ([b"caf\xe9"], [b"--system", b"\xff", b"hi"]):
        done = run_hearth(*data, "chat", str(tiny_model), *extra, "--max-tokens", "4", "--temp", "0")
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert b"Traceback" not in done.stderr


def test_a_data_dir_that_is_a_file_is_one_line(tmp_path: Path, tiny_model: Path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    for args in (
        ["--data-dir", str(blocker), "inspect", str(tiny_model)],
        ["--data-dir", str(blocker / "sub")],
    ):
        done = run_hearth(*args)
        err = done.stderr.decode()
        assert done.returncode == 2, err
        assert err.strip().splitlines() == [
            f"hearth: --data-dir {args[1]}: {blocker} is a file, not a folder."
        ]


# ------------------------------------------------------------------------------ native load errors


def line(text: str, level: LogLevel = LogLevel.ERROR) -> LogLine:
    return LogLine(level, text)


def test_the_most_specific_native_error_is_the_cause():
    log = [
        line("llama_model_loader: loaded meta data", LogLevel.INFO),
        line("llama_model_load: error loading model: missing tensor 'blk.0.attn_k.weight'"),
        line("llama_model_load_from_file_impl: failed to load model"),
    ]
    assert most_specific_error(log) == "missing tensor 'blk.0.attn_k.weight'"
    gguf_first = [
        line("gguf_init_from_file_impl: tensor 'x' has invalid ggml type 99 (NONE)"),
        line("llama_model_load: error loading model: llama_model_loader: failed to load model from /m.gguf"),
        line("llama_model_load_from_file_impl: failed to load model"),
    ]
    assert most_specific_error(gguf_first) == "tensor 'x' has invalid ggml type 99 (NONE)"
    assert most_specific_error([line("llama_model_load_from_file_impl: failed to load model")]) is None
    assert most_specific_error([line("all good", LogLevel.INFO)]) is None


def test_a_load_failure_names_llama_cpps_cause(tmp_path: Path, tiny_model: Path):
    from engine import Engine

    broken = rewrite_gguf(tiny_model, tmp_path / "missing-k.gguf", drop=("blk.0.attn_k.weight",))
    try:
        plan = plan_for(broken)
    except Exception as exc:  # the catalog may refuse it first, which is as good
        pytest.skip(f"refused before llama.cpp: {exc}")
    with pytest.raises(LoadFailed) as info:
        Engine.load(plan).wait_ready(60)
    assert (
        info.value.message
        == "llama.cpp could not load missing-k.gguf: tensor 'blk.0.attn_k.weight' not found"
    )
