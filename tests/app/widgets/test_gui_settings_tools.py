"""Settings → Tools (issue 29), driven in the real window: the servers of mcp.json with their
state or one line of why they failed, Details with the tools and stderr, secrets never shown;
a server added, switched off and on, edited, restarted, removed and imported, each saved to
mcp.json at once; the tools trusted to run without asking, and asking again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.platform.paths import AppPaths
from app.widgets.settings_dialog import SettingsPage
from app.widgets.settings_tools import ToolsPage
from engine import SECRET_MASK, ServerState, read_mcp_config
from tests.helpers import WAIT, open_window
from tests.mcp_servers import filesystem_server

SECRET = "sk-do-not-show-1234"


@pytest.fixture()
def tools_page(qtbot, app_paths: AppPaths, hardware):
    config = {
        "mcpServers": {
            "time": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_time"],
                "env": {"TIME_KEY": SECRET},
            },
            "weather": {"command": "hearth-weather-server-missing", "args": ["--units", "metric"]},
        }
    }
    app_paths.mcp_config.write_text(json.dumps(config))
    window = open_window(qtbot, app_paths, hardware)
    qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = window.settings_dialog
    dialog.show_page(SettingsPage.TOOLS)
    page = dialog.tools_page
    qtbot.waitUntil(lambda: state_of(page, "time").startswith("ready"), timeout=WAIT)
    qtbot.waitUntil(lambda: state_of(page, "weather").startswith("failed"), timeout=WAIT)
    yield page
    window.close()


def rows(page: ToolsPage) -> dict[str, tuple[str, str, bool]]:
    out = {}
    for i in range(page.tree.topLevelItemCount()):
        item = page.tree.topLevelItem(i)
        out[item.text(0)] = (item.text(1), item.text(2), item.checkState(0) == Qt.CheckState.Checked)
    return out


def state_of(page: ToolsPage, name: str) -> str:
    return rows(page).get(name, ("", "", False))[0]


def select(page: ToolsPage, name: str) -> None:
    for i in range(page.tree.topLevelItemCount()):
        if page.tree.topLevelItem(i).text(0) == name:
            page.tree.setCurrentItem(page.tree.topLevelItem(i))


def test_each_server_shows_its_state_and_details_without_secrets(qtbot, tools_page: ToolsPage) -> None:
    page = tools_page
    assert state_of(page, "time") == "ready · 2 tools"
    assert state_of(page, "weather") == "failed: command not found: hearth-weather-server-missing"
    select(page, "time")
    details = page.details.toPlainText()
    assert "get_current_time: Get current time in a specific timezone" in details
    assert f"TIME_KEY={SECRET_MASK}" in details and SECRET not in details
    assert all(SECRET not in " ".join(row[:2]) for row in rows(page).values())
    assert page.restart_button.isEnabled() and page.remove_button.isEnabled()


def test_a_server_added_switched_edited_and_removed_is_saved_each_time(
    qtbot, tools_page: ToolsPage, app_paths: AppPaths, tmp_path: Path
) -> None:
    page, form = tools_page, tools_page.form
    files = filesystem_server(tmp_path)
    form.name_edit.setText("files")
    form.target_edit.setText(f"{files.command} {files.args[0]} {tmp_path}")
    form.pairs_edit.setPlainText("LOG_LEVEL=debug")
    qtbot.mouseClick(form.submit_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: state_of(page, "files").startswith("ready"), timeout=WAIT)
    saved = {c.name: c for c in read_mcp_config(app_paths.mcp_config)}
    assert saved["files"].args == (files.args[0], str(tmp_path)) and saved["files"].env == (
        ("LOG_LEVEL", "debug"),
    )

    select(page, "files")
    page.tree.currentItem().setCheckState(0, Qt.CheckState.Unchecked)
    qtbot.waitUntil(lambda: state_of(page, "files") == "off", timeout=WAIT)
    assert not {c.name: c for c in read_mcp_config(app_paths.mcp_config)}["files"].enabled
    select(page, "files")
    page.tree.currentItem().setCheckState(0, Qt.CheckState.Checked)
    qtbot.waitUntil(lambda: state_of(page, "files").startswith("ready"), timeout=WAIT)

    select(page, "time")
    qtbot.mouseClick(page.edit_button, Qt.MouseButton.LeftButton)
    assert form.pairs_edit.toPlainText() == f"TIME_KEY={SECRET_MASK}"  # shown masked, even here
    form.name_edit.setText("clock")
    qtbot.mouseClick(form.submit_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: state_of(page, "clock").startswith("ready"), timeout=WAIT)
    saved = {c.name: c for c in read_mcp_config(app_paths.mcp_config)}
    assert "time" not in saved and saved["clock"].env == (("TIME_KEY", SECRET),)  # the secret kept

    select(page, "files")
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "files" not in rows(page), timeout=WAIT)
    # An edited server keeps its place in the file.
    assert [c.name for c in read_mcp_config(app_paths.mcp_config)] == ["clock", "weather"]


def test_form_mistakes_are_one_line_and_nothing_is_saved(
    qtbot, tools_page: ToolsPage, app_paths: AppPaths
) -> None:
    form, before = tools_page.form, app_paths.mcp_config.read_text()
    qtbot.mouseClick(form.submit_button, Qt.MouseButton.LeftButton)
    assert form.error_label.text() == "Give the server a name."
    form.name_edit.setText("time")
    form.target_edit.setText("uvx mcp-server-time")
    qtbot.mouseClick(form.submit_button, Qt.MouseButton.LeftButton)
    assert form.error_label.text() == "There is already a tool server named 'time'."
    form.name_edit.setText("other")
    form.target_edit.setText('npx "unclosed')
    qtbot.mouseClick(form.submit_button, Qt.MouseButton.LeftButton)
    assert form.error_label.text().startswith("The command line cannot be read")
    assert app_paths.mcp_config.read_text() == before


def test_a_failed_server_restarts_and_says_why_again(qtbot, tools_page: ToolsPage) -> None:
    page = tools_page
    select(page, "weather")
    qtbot.mouseClick(page.restart_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: state_of(page, "weather").startswith("failed: command not found"), timeout=WAIT)
    assert page.servers.status("time").state is ServerState.READY  # the others go on


def test_import_adds_another_apps_servers_and_keeps_its_own(
    qtbot, tools_page: ToolsPage, tmp_path: Path
) -> None:
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "uvx", "args": ["mcp-server-time"]},
                    "git": {"command": "hearth-git-server-missing", "disabled": True},
                }
            }
        )
    )
    assert tools_page.import_from(claude) == 1
    qtbot.waitUntil(lambda: "git" in rows(tools_page), timeout=WAIT)
    assert rows(tools_page)["git"] == ("off", "hearth-git-server-missing", False)
    assert rows(tools_page)["time"][1].startswith(sys.executable)  # Hearth's own kept
    assert tools_page.import_from(claude) == 0 and "has no servers" in tools_page.form.error_label.text()
    broken = tmp_path / "broken.json"
    broken.write_text("{oops")
    assert tools_page.import_from(broken) == 0
    assert tools_page.form.error_label.text().startswith("broken.json is not valid JSON")


def test_trusted_tools_are_listed_and_can_ask_again(qtbot, tools_page: ToolsPage) -> None:
    trust = tools_page.servers.trust
    trust.trust("time/get_current_time")
    tools_page.show_servers()
    assert [tools_page.trusted.item(i).text() for i in range(tools_page.trusted.count())] == [
        "time/get_current_time"
    ]
    tools_page.trusted.setCurrentRow(0)
    qtbot.mouseClick(tools_page.forget_button, Qt.MouseButton.LeftButton)
    assert tools_page.trusted.count() == 0 and not trust.is_trusted("time/get_current_time")
