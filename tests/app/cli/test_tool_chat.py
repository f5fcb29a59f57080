"""`hearth chat MODEL PROMPT --mcp mcp.json --allow-tools` (issue 29): the model calls real
MCP servers (mcp-server-time from PyPI, the npm filesystem server) in the same loop as the
window; one stderr line per call, the answer alone on stdout; without --allow-tools the
command refuses in one line and starts nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.cli.tool_chat import NOT_ALLOWED
from engine import mcp_config_text
from tests.app.cli.test_cli import run
from tests.mcp_servers import filesystem_server, server_processes, time_server


def test_mcp_without_allow_tools_refuses_and_starts_nothing(capsys, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(mcp_config_text([time_server()]))
    before = {child.pid for child in server_processes()}
    code, out, err = run(capsys, "chat", str(tmp_path / "any.gguf"), "hi", "--mcp", str(config))
    assert code == 2 and out == "" and err == f"hearth: {NOT_ALLOWED}\n"
    assert {child.pid for child in server_processes()} == before
    code, _out, err = run(capsys, "chat", str(tmp_path / "any.gguf"), "hi", "--allow-tools")
    assert code == 2 and "--allow-tools needs --mcp" in err
    code, _out, err = run(
        capsys, "chat", "m.gguf", "hi", "--mcp", str(tmp_path / "none.json"), "--allow-tools"
    )
    assert code == 2 and err.strip().endswith("none.json does not exist.")


@pytest.mark.qwen
def test_qwen_tells_the_time_in_tokyo_from_the_time_server(capsys, tmp_path: Path, qwen_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(mcp_config_text([time_server()]))
    code, out, err = run(
        capsys, "chat", str(qwen_path), "What time is it in Tokyo right now?",
        "--mcp", str(config), "--allow-tools", "--temp", "0", "--ctx", "4096", "--json",
    )  # fmt: skip
    assert code == 0, err
    reply = json.loads(out)
    first = reply["tool_rounds"][0]["calls"][0]
    assert first["name"] == "get_current_time" and first["status"] == "ok" and first["server"] == "time"
    assert json.loads(first["arguments"]) == {"timezone": "Asia/Tokyo"}
    stamp = json.loads(first["result"])["datetime"]  # e.g. 2026-12-05T06:28:08+09:00
    hour, minute = re.search(r"T(\d\d):(\d\d)", stamp).groups()
    assert re.search(rf"\b0?{int(hour) % 12 or 12}:{minute}|{hour}:{minute}", reply["text"]), reply["text"]
    assert "<tool_call>" not in reply["text"]
    assert "[tool get_current_time on time " in err and " → ok " in err


@pytest.mark.qwen
def test_qwen_lists_a_folder_through_the_filesystem_server(capsys, tmp_path: Path, qwen_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "groceries.md").write_text("- eggs\n")
    (folder / "kyoto-plans.txt").write_text("Visit Kyoto in April.\n")
    config = tmp_path / "mcp.json"
    config.write_text(mcp_config_text([filesystem_server(folder)]))
    code, out, err = run(
        capsys, "chat", str(qwen_path), f"Which files are in the folder {folder}?",
        "--mcp", str(config), "--allow-tools", "--temp", "0", "--ctx", "8192",
    )  # fmt: skip
    assert code == 0, err
    assert "groceries.md" in out and "kyoto-plans.txt" in out
    assert "<tool_call>" not in out and "[tool" not in out  # stdout: the answer alone
    calls = [line for line in err.splitlines() if line.startswith("[tool ")]
    assert calls and calls[0].startswith("[tool list_directory on files ") and " → ok " in calls[0]
