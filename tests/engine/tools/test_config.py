"""mcp.json (issue 29): the `mcpServers` shape of Claude Desktop, LM Studio and Cursor read
into configs and written back; every mistake one line naming the file, server and field;
secrets never shown."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from engine import (
    SECRET_MASK,
    McpConfigError,
    ServerConfig,
    Transport,
    mcp_config_text,
    parse_mcp_config,
    read_mcp_config,
    write_mcp_config,
)

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "github": {
            "command": "docker",
            "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"},
        },
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer sk-123"}},
        "off": {"command": "uvx", "args": ["mcp-server-time"], "disabled": True},
    }
}


def test_a_claude_desktop_config_reads_as_it_is() -> None:
    files, github, remote, off = parse_mcp_config(json.dumps(CLAUDE_DESKTOP))
    assert files == ServerConfig(
        "filesystem",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"),
    )
    assert files.transport is Transport.STDIO and files.enabled
    assert github.env == (("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_secret"),)
    assert remote.transport is Transport.HTTP and remote.headers == (("Authorization", "Bearer sk-123"),)
    assert not off.enabled


def test_secrets_are_masked_wherever_a_config_is_shown() -> None:
    _files, github, remote, _off = parse_mcp_config(json.dumps(CLAUDE_DESKTOP))
    assert github.shown_env() == (("GITHUB_PERSONAL_ACCESS_TOKEN", SECRET_MASK),)
    assert remote.shown_headers() == (("Authorization", SECRET_MASK),)
    assert "ghp_secret" not in github.summary() and "sk-123" not in remote.summary()
    assert github.summary() == "docker run -i --rm ghcr.io/github/github-mcp-server"
    assert remote.summary() == "https://example.com/mcp"


@pytest.mark.parametrize("kind", ["http", "streamable-http", "streamableHttp"])
def test_the_type_names_of_other_apps_are_accepted(kind: str) -> None:
    (server,) = parse_mcp_config(
        json.dumps({"mcpServers": {"x": {"type": kind, "url": "http://127.0.0.1:1/mcp"}}})
    )
    assert server.transport is Transport.HTTP


def test_written_and_read_back_it_is_the_same(tmp_path: Path) -> None:
    servers = parse_mcp_config(json.dumps(CLAUDE_DESKTOP))
    path = tmp_path / "sub" / "mcp.json"
    write_mcp_config(path, servers)
    assert read_mcp_config(path) == servers
    assert parse_mcp_config(mcp_config_text(servers)) == servers
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # it may hold API keys
    assert [p.name for p in path.parent.iterdir()] == ["mcp.json"]  # no temporary file left


def test_no_file_yet_means_no_servers(tmp_path: Path) -> None:
    assert read_mcp_config(tmp_path / "mcp.json") == ()
    assert parse_mcp_config("") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "mcp.json is not valid JSON (line 1"),
        ("[]", 'mcp.json must hold a JSON object with "mcpServers".'),
        ('{"mcpServers": []}', '"mcpServers" must be an object'),
        ('{"mcpServers": {"a": 3}}', "server 'a' must be an object."),
        ('{"mcpServers": {"a": {}}}', 'server \'a\' needs a "command" or a "url".'),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', '"args" must be a list of strings.'),
        ('{"mcpServers": {"a": {"command": "x", "env": ["A=1"]}}}', '"env" must be an object'),
        ('{"mcpServers": {"a": {"command": "x", "disabled": "no"}}}', '"disabled" must be true or false.'),
        ('{"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}', "type 'sse' is not supported"),
        ('{"mcpServers": {"a": {"type": "http", "command": "x"}}}', 'an http server needs a "url".'),
        ('{"mcpServers": {"a": {"url": "ftp://h"}}}', "the url must start with http:// or https://."),
        (
            '{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}',
            "needs either a command or a url, not both.",
        ),
    ],
)
def test_each_mistake_is_one_line_naming_where(text: str, message: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(text, "mcp.json")
    assert message in caught.value.message and "\n" not in caught.value.message
    assert caught.value.message.startswith("mcp.json")


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(McpConfigError, match=r"mcp\.json cannot be read"):
        read_mcp_config(path)
