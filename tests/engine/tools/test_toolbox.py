"""All of a config's servers as one toolbox (issue 29), on real third-party servers (the npm
filesystem and everything servers, mcp-server-time from PyPI) and the misbehaving one: tools
named uniquely for the model, each call checked against its schema before it reaches a
server, run with the timeout, its result capped and said so."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from engine import CallStatus, ServerConfig, ServerState, Toolbox, ToolCall, ToolLoopLimits, ToolSpec
from tests.mcp_servers import everything_server, filesystem_server, time_server

FAULTS = str(Path(__file__).with_name("fault_server.py"))


def faulty(name: str) -> ServerConfig:
    return ServerConfig(name, command=sys.executable, args=(FAULTS, "ok"))


def call(name: str, arguments: object, call_id: str = "call_1") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(call_id, name, text)


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    (folder / "groceries.md").write_text("- eggs\n- rice\n", encoding="utf-8")
    (folder / "plans.txt").write_text("Visit Kyoto in April.\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def toolbox(notes: Path):
    seen: list = []
    box = Toolbox(
        [time_server(), filesystem_server(notes), everything_server(), faulty("a"), faulty("b"),
         ServerConfig("idle", command="hearth-not-started", enabled=False)],
        on_status=seen.append,
        limits=ToolLoopLimits(result_max_chars=1000, call_timeout_s=3.0),
    )  # fmt: skip
    began = time.monotonic()
    statuses = box.start_all()
    box.started_in = time.monotonic() - began
    box.seen = seen
    assert {s.name: s.state for s in statuses} == {
        "time": ServerState.READY, "files": ServerState.READY, "everything": ServerState.READY,
        "a": ServerState.READY, "b": ServerState.READY, "idle": ServerState.STOPPED,
    }  # fmt: skip
    yield box
    box.stop_all()


def test_servers_start_at_once_and_report_each_step(toolbox: Toolbox) -> None:
    starts = [s.name for s in toolbox.seen if s.state is ServerState.STARTING]
    assert sorted(starts) == ["a", "b", "everything", "files", "time"]  # "idle" is off


def test_a_name_two_servers_share_is_told_apart(toolbox: Toolbox) -> None:
    names = [tool.name for tool in toolbox.tools()]
    assert len(names) == len(set(names))
    assert {"a__echo", "b__echo", "everything__echo"} <= set(names) and "echo" not in names
    assert "get_current_time" in names and "read_text_file" in names  # unique names stay as they are
    spec = next(tool for tool in toolbox.tools() if tool.name == "b__echo")
    assert spec.server == "b" and spec.server_name == "echo"
    record = toolbox.run(call("b__echo", {"text": "hi"}))
    assert record.status is CallStatus.OK and record.result == "echo: hi" and record.server == "b"


def test_tools_can_be_left_out_by_server_or_by_tool(toolbox: Toolbox) -> None:
    names = {tool.name for tool in toolbox.tools(off={"everything", "a", "files/write_file"})}
    assert "write_file" not in names and "read_text_file" in names and "get-sum" not in names
    assert "echo" in names and "b__echo" not in names  # b's alone now: no clash to tell apart
    offered = toolbox.openai_tools(off={"everything", "a", "b"})
    assert all(
        tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object" for tool in offered
    )


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (call("rm_rf", {}), "There is no tool named 'rm_rf'."),
        (
            call("get_current_time", "{timezone: Tokyo"),
            "The arguments for get_current_time are not valid JSON.",
        ),
        (call("get_current_time", "[1, 2]"), "The arguments for get_current_time must be a JSON object."),
        (call("get_current_time", {}), "do not fit its schema: 'timezone' is a required property"),
        (call("get-sum", {"a": "one", "b": 2}), "do not fit its schema: a: 'one' is not of type 'number'"),
    ],
)
def test_a_call_that_cannot_run_is_refused_in_one_line(toolbox: Toolbox, made: ToolCall, why: str) -> None:
    checked = toolbox.check(made)
    assert not isinstance(checked, ToolSpec)
    assert checked.status is CallStatus.REFUSED and why in checked.result and "\n" not in checked.result
    assert toolbox.run(made).status is CallStatus.REFUSED  # run checks too: nothing reaches a server


def test_the_filesystem_server_reads_the_folder_it_was_given(toolbox: Toolbox, notes: Path) -> None:
    listed = toolbox.run(call("list_directory", {"path": str(notes)}))
    assert listed.status is CallStatus.OK and "groceries.md" in listed.result and "plans.txt" in listed.result
    read = toolbox.run(call("read_text_file", {"path": str(notes / "plans.txt")}))
    assert read.status is CallStatus.OK and "Kyoto" in read.result
    outside = toolbox.run(call("read_text_file", {"path": "/etc/passwd"}))
    assert outside.status is CallStatus.ERROR and "root:" not in outside.result


def test_the_everything_server_adds(toolbox: Toolbox) -> None:
    record = toolbox.run(call("get-sum", {"a": 2, "b": 40}))
    assert record.status is CallStatus.OK and "42" in record.result


def test_a_big_result_is_capped_and_says_so(toolbox: Toolbox) -> None:
    record = toolbox.run(call("a__big", {"megabytes": 1}))
    assert record.status is CallStatus.OK and record.truncated
    assert record.full_chars == 1024 * 1024 and len(record.result) < 1200
    assert "1,048,576" in record.result or "1048576" in record.result  # the model is told the full size


def test_a_hung_call_is_an_error_after_the_call_timeout(toolbox: Toolbox) -> None:
    began = time.monotonic()
    record = toolbox.run(call("a__hang", {}))
    assert record.status is CallStatus.ERROR and "did not answer within 3 s" in record.result
    assert time.monotonic() - began < 6
    assert toolbox.status("a").state is ServerState.READY


def test_changed_configs_stop_what_went_and_keep_what_stayed(notes: Path) -> None:
    box = Toolbox([time_server(), faulty("a")])
    box.start_all()
    kept = box._servers["time"]
    box.replace_configs([time_server(), faulty("renamed")])
    assert box._servers["time"] is kept and kept.status().state is ServerState.READY
    assert {s.name: s.state for s in box.statuses()} == {
        "time": ServerState.READY,
        "renamed": ServerState.STOPPED,
    }
    box.stop_all()
    assert all(s.state is ServerState.STOPPED for s in box.statuses())
