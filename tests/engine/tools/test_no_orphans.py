"""No tool server outlives Hearth (issue 29): stopped with the toolbox, killed from outside
(its calls then fail in one line), and when Hearth itself is SIGKILLed the servers see their
stdin close and exit, npm ones (node) and Python ones alike."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine import CallStatus, ServerState, Toolbox, ToolCall
from tests.mcp_servers import everything_server, filesystem_server, server_processes, time_server

GONE_WITHIN_S = 5.0


def server_children(parent: psutil.Process) -> list[psutil.Process]:
    return server_processes(parent)


def wait_gone(pids: list[int], timeout_s: float = GONE_WITHIN_S) -> list[int]:
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [
            pid
            for pid in alive
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]
        time.sleep(0.05)
    return alive


def test_stop_all_leaves_no_child(tmp_path: Path) -> None:
    me = psutil.Process()
    before = {child.pid for child in server_children(me)}
    box = Toolbox([time_server(), filesystem_server(tmp_path), everything_server()])
    assert all(s.state is ServerState.READY for s in box.start_all())
    started = [child.pid for child in server_children(me) if child.pid not in before]
    assert len(started) >= 3
    began = time.monotonic()
    box.stop_all()
    assert time.monotonic() - began < GONE_WITHIN_S
    assert wait_gone(started) == []


def test_a_server_killed_from_outside_fails_its_next_call(tmp_path: Path) -> None:
    me = psutil.Process()
    before = {child.pid for child in server_children(me)}
    box = Toolbox([filesystem_server(tmp_path)])
    box.start_all()
    (pid,) = [child.pid for child in server_children(me) if child.pid not in before]
    os.kill(pid, signal.SIGKILL)
    record = box.run(ToolCall("c1", "list_directory", json.dumps({"path": str(tmp_path)})))
    assert record.status is CallStatus.ERROR and "stopped" in record.result and "\n" not in record.result
    assert box.status("files").state is ServerState.FAILED
    box.stop_all()


HOLDER = """
import json, sys, time
from pathlib import Path
from engine import Toolbox
from tests.mcp_servers import filesystem_server, time_server, everything_server
box = Toolbox([time_server(), filesystem_server(Path(sys.argv[1])), everything_server()])
print(json.dumps([s.state for s in box.start_all()]), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_servers_end_when_hearth_is_killed(tmp_path: Path, how: signal.Signals) -> None:
    repo = Path(__file__).resolve().parents[3]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], cwd=repo, stdout=subprocess.PIPE, text=True
    )
    try:
        assert json.loads(holder.stdout.readline()) == ["ready"] * 3
        children = [child.pid for child in psutil.Process(holder.pid).children(recursive=True)]
        assert len(children) >= 3
        holder.send_signal(how)
        holder.wait(10)
        assert wait_gone(children) == [], "tool servers outlived the process that started them"
    finally:
        if holder.poll() is None:
            holder.kill()
