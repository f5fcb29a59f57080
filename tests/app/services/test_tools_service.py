"""The window's ToolsService (issue 29) without the window: a broken mcp.json is one line and
is never overwritten; calls answer on the GUI thread, and a stopped reply's answer is dropped."""

from __future__ import annotations

import json

import pytest

from app.platform.paths import AppPaths
from app.services.tools import ToolsService
from app.store.history import Store
from engine import CallStatus, McpConfigError, ServerConfig, ToolCall
from tests.mcp_servers import time_server

WAIT = 30_000


@pytest.fixture()
def store(app_paths: AppPaths):
    store = Store(app_paths.database_file)
    yield store
    store.close()


def test_a_broken_file_is_said_and_kept(qapp, app_paths: AppPaths, store: Store) -> None:
    app_paths.mcp_config.write_text('{"mcpServers": {"a": {"command": 3}}}')
    service = ToolsService(app_paths, store)
    assert service.config_error() == "mcp.json: server 'a': \"command\" must be a string."
    assert service.configs() == ()
    with pytest.raises(McpConfigError, match=r"Fix .* first"):
        service.add(ServerConfig("b", command="x"))
    assert app_paths.mcp_config.read_text() == '{"mcpServers": {"a": {"command": 3}}}'
    service.shutdown()


def test_a_call_answers_on_the_gui_thread_and_a_cancelled_one_is_dropped(
    qtbot, app_paths: AppPaths, store: Store
) -> None:
    app_paths.mcp_config.write_text(
        json.dumps(
            {"mcpServers": {"time": {"command": time_server().command, "args": list(time_server().args)}}}
        )
    )
    service = ToolsService(app_paths, store)
    service.start()
    qtbot.waitUntil(lambda: bool(service.tools()), timeout=WAIT)
    call = ToolCall("c1", "get_current_time", '{"timezone": "Asia/Tokyo"}')
    with qtbot.waitSignal(service.call_done, timeout=WAIT) as done:
        service.run_call("token-1", call)
    token, record = done.args
    assert token == "token-1" and record.status is CallStatus.OK and "Asia/Tokyo" in record.result
    answered = []
    service.call_done.connect(lambda token, record: answered.append(token))
    service.run_call("token-2", call)
    service.cancel_calls("token-2")
    qtbot.wait(1500)
    assert answered == []
    service.shutdown()
    service.run_call("token-3", call)  # after shutdown (the window closing): nothing runs, nothing raises
    assert answered == []
