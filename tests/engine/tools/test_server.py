"""One MCP server on the official SDK (issue 29), against a server that misbehaves on
request (fault_server.py) and real ones: whatever the child does, the caller gets a status
or an outcome with one line of why, never an exception it did not ask for."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from engine import ServerConfig, ServerState, ToolError, ToolServer
from tests.mcp_servers import free_port, time_server, wait_for_port

FAULTS = str(Path(__file__).with_name("fault_server.py"))


def faulty(mode: str, name: str | None = None) -> ServerConfig:
    return ServerConfig(name or mode, command=sys.executable, args=(FAULTS, mode))


@pytest.fixture(scope="module")
def server():
    """The misbehaving server in its working mode, shared: each test leaves it usable."""
    server = ToolServer(faulty("ok"))
    status = server.start(20)
    assert status.state is ServerState.READY, status.error
    yield server
    server.stop()


def test_a_real_server_lists_its_tools_and_answers() -> None:
    seen = []
    server = ToolServer(time_server(), on_status=seen.append)
    status = server.start(20)
    try:
        assert status.state is ServerState.READY and status.error == ""
        assert {tool.name for tool in status.tools} == {"get_current_time", "convert_time"}
        spec = next(tool for tool in status.tools if tool.name == "get_current_time")
        assert spec.server == "time" and "timezone" in spec.input_schema["properties"]
        assert spec.openai_tool()["function"]["name"] == "get_current_time"
        outcome = server.call("get_current_time", {"timezone": "Asia/Tokyo"}, 10)
        assert not outcome.is_error and '"timezone": "Asia/Tokyo"' in outcome.text
        wrong = server.call("get_current_time", {"timezone": "Nowhere/Atlantis"}, 10)
        assert wrong.is_error and "Invalid timezone" in wrong.text  # the tool's own error, for the model
    finally:
        server.stop()
    assert server.status().state is ServerState.STOPPED
    assert [s.state for s in seen] == [ServerState.STARTING, ServerState.READY, ServerState.STOPPED]


def test_a_command_that_does_not_exist_fails_in_one_line() -> None:
    status = ToolServer(ServerConfig("gone", command="hearth-no-such-command")).start(5)
    assert status.state is ServerState.FAILED
    assert status.error == "command not found: hearth-no-such-command"


def test_a_server_that_exits_at_start_says_its_last_words() -> None:
    began = time.monotonic()
    status = ToolServer(faulty("exit")).start(20)
    assert status.state is ServerState.FAILED and time.monotonic() - began < 10
    assert "fatal: this server has no configuration" in status.error and "\n" not in status.error
    assert "fatal: this server has no configuration" in status.stderr  # for Details


@pytest.mark.parametrize("mode", ["garbage", "notrpc"])
def test_a_server_that_does_not_speak_json_rpc_fails_fast(mode: str) -> None:
    began = time.monotonic()
    status = ToolServer(faulty(mode)).start(20)
    assert status.state is ServerState.FAILED and time.monotonic() - began < 10
    assert status.error == "it wrote something on stdout that is not MCP JSON-RPC"


def test_a_server_that_never_answers_times_out_at_start() -> None:
    # `cat` echoes the client's own request back: never a response to it.
    began = time.monotonic()
    status = ToolServer(ServerConfig("echo", command="sleep", args=("60",))).start(1.5)
    assert status.state is ServerState.FAILED and status.error.startswith("did not start within 1.5 s")
    assert time.monotonic() - began < 8


def test_stop_gives_up_a_start_in_progress_at_once() -> None:
    """Quitting (or switching a server off) while it starts does not wait out its timeout,
    and the child is gone when stop returns."""
    import threading

    import psutil

    server = ToolServer(ServerConfig("slow", command="sleep", args=("60",)))
    results = []
    starter = threading.Thread(target=lambda: results.append(server.start(30)))
    starter.start()
    deadline = time.monotonic() + 10
    while not _children("sleep") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children("sleep"), "the server's child never started"
    began = time.monotonic()
    server.stop()
    starter.join(15)
    assert time.monotonic() - began < 10 and not starter.is_alive()
    assert results[0].state is ServerState.STOPPED and results[0].error == ""
    assert server.status().state is ServerState.STOPPED
    assert not [p for p in _children("sleep") if p.status() != psutil.STATUS_ZOMBIE]


def _children(name: str) -> list:
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):  # other children come and go
        try:
            if child.name() == name:
                found.append(child)
        except psutil.Error:
            continue
    return found


def test_a_hung_call_times_out_and_the_server_goes_on(server: ToolServer) -> None:
    began = time.monotonic()
    outcome = server.call("hang", {}, 1.0)
    assert outcome.is_error and outcome.text == "The tool did not answer within 1 s."
    assert time.monotonic() - began < 4
    assert server.call("echo", {"text": "still here"}, 5).text == "echo: still here"


def test_ten_megabytes_come_back_whole(server: ToolServer) -> None:
    outcome = server.call("big", {"megabytes": 10}, 60)
    assert not outcome.is_error and len(outcome.text) == 10 * 1024 * 1024  # capped by the Toolbox


def test_a_tool_error_and_an_unknown_tool_are_outcomes(server: ToolServer) -> None:
    assert server.call("add", {"a": 2, "b": 3}, 5).text == "5"
    unknown = server.call("no_such_tool", {}, 5)
    assert unknown.is_error and "no_such_tool" in unknown.text
    bad = server.call("add", {"a": "two"}, 5)
    assert bad.is_error
    assert server.status().state is ServerState.READY


def test_a_crash_mid_call_fails_the_server_with_its_stderr() -> None:
    server = ToolServer(faulty("ok", "crashy"))
    assert server.start(20).state is ServerState.READY
    outcome = server.call("crash", {}, 10)
    assert outcome.is_error and outcome.text.startswith("The tool server 'crashy' stopped")
    status = server.status()
    assert status.state is ServerState.FAILED and "crashing on purpose" in status.error
    with pytest.raises(ToolError, match="'crashy' is not running"):
        server.call("echo", {"text": "x"}, 5)
    assert server.start(20).state is ServerState.READY  # Restart brings it back
    assert server.call("echo", {"text": "back"}, 5).text == "echo: back"
    server.stop()


def test_streamable_http_with_a_header(tmp_path: Path) -> None:
    import subprocess

    port = free_port()
    child = subprocess.Popen([sys.executable, FAULTS, "http", str(port)], stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        server = ToolServer(ServerConfig("web", url=url, headers=(("Authorization", "Bearer secret"),)))
        status = server.start(20)
        assert status.state is ServerState.READY, status.error
        assert server.call("add", {"a": 20, "b": 22}, 10).text == "42"
        server.stop()
        refused = ToolServer(ServerConfig("web", url=url)).start(10)  # no key: 401
        assert (
            refused.state is ServerState.FAILED
            and refused.error == "the server answered HTTP 401 Unauthorized"
        )
    finally:
        child.terminate()
        child.wait(10)
