"""`hearth serve`: headless, the plan and phases printed, one line per request, a clean
exit on SIGTERM or Ctrl+C."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.api_support import TIMEOUT, Serve
from tests.conftest import SCRIPT_TEXT


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_prints_phases_logs_requests_and_exits_cleanly(scripted_model: Path, sig: int) -> None:
    serve = Serve(str(scripted_model), "--port", "0", "--ctx", "512", "--parallel", "2")
    try:
        url = serve.read_until(r"at (http://127\.0\.0\.1:\d+/v1) ").group(1)
        assert any("fits" in line for line in serve.lines[:3])  # the plan's verdict
        assert any("Load weights: " in line for line in serve.lines)  # each phase, timed
        import openai

        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            temperature=0,
            extra_body={"repeat_penalty": 1},
        )
        assert reply.choices[0].message.content == SCRIPT_TEXT
        line = serve.read_until(r"POST /v1/chat/completions 200")
        assert "OpenAI/Python" in line.string and "+ 9 tokens" in line.string
    finally:
        code, err = serve.stop(sig)
    assert code == 0, err
    assert "Stopping…" in serve.lines
    assert "Traceback" not in err


def test_a_taken_port_is_a_one_line_error(scripted_model: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve = Serve(str(scripted_model), "--port", str(port), "--ctx", "512", "--parallel", "1")
        _, err = serve.proc.communicate(timeout=TIMEOUT)
    assert serve.proc.returncode == 2
    assert err.strip() == f"hearth: Port {port} is in use on 127.0.0.1: choose another port."


def test_bad_options_are_refused_before_loading(scripted_model: Path) -> None:
    serve = Serve(str(scripted_model), "--port", "70000")
    _, err = serve.proc.communicate(timeout=TIMEOUT)
    assert serve.proc.returncode == 2 and "--port must be between 0 and 65535" in err
