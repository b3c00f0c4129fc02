"""MCP through `reminder-bridge stdio`, real processes: an `mcp` SDK host in front of the bundled
legacy server, in both eras (`legacy` = initialize handshake, `auto` = 2026-07-28 discover)."""
from __future__ import annotations

import sys

import pytest
from mcp import Client, StdioServerParameters

from tests.peers.mcp_host import Reminders

LEGACY_SERVER = [sys.executable, "-m", "bridge.examples.mcp_legacy_server"]


def proxied(*options: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "bridge", "stdio", *options, "--", *LEGACY_SERVER])


async def settle(client: Client) -> None:
    """A round trip after the call, so notifications sent before its result have been dispatched."""
    await client.call_tool("echo", {"text": "sync"})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_standard_host_receives_standard_reminders_logs_and_results(mode):
    ext = Reminders()
    logs = []

    async def on_log(params):
        logs.append(params)

    async with Client(proxied(), mode=mode, extensions=[ext], logging_callback=on_log) as client:
        result = await client.call_tool("touch_file", {"path": "src/lib.rs"})
        await settle(client)
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert [c.text for c in result.content] == ["touched src/lib.rs"]
    assert result.structured_content == {"path": "src/lib.rs"}
    assert len(ext.received) == 1
    reminder = ext.received[0]
    assert reminder["body"] == "src/lib.rs changed externally; re-read it before editing."
    assert reminder["dedupeKey"] == "file_changed:src/lib.rs" and reminder["ttlTurns"] == 2
    assert reminder["tags"] == ["workspace", "file_changed"]
    assert [(log.logger, log.data) for log in logs] == [("fs", "touched src/lib.rs")]  # plain logs untouched


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_host_without_reminder_support_gets_them_in_the_tool_result(mode):
    async with Client(proxied(), mode=mode) as client:
        result = await client.call_tool("touch_file", {"path": "a.py"})
        plain = await client.call_tool("echo", {"text": "no reminder pending"})
    texts = [c.text for c in result.content]
    assert texts[0] == "touched a.py"
    assert texts[1].startswith('<system-reminder id="') and texts[1].endswith(
        'source="provider">a.py changed externally; re-read it before editing.</system-reminder>')
    assert result.structured_content == {"path": "a.py"}  # structuredContent untouched
    assert [c.text for c in plain.content] == ["no reminder pending"]


async def test_host_dialect_none_with_drop_fallback_loses_only_reminders(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.fs]\nprotocol = "mcp"\nhost_dialect = "none"\n[routes.fs.fallback]\nmcp_host_none = "drop"\n')
    async with Client(proxied("--rules", str(rules)), mode="legacy") as client:
        result = await client.call_tool("touch_file", {"path": "a.py"})
    assert [c.text for c in result.content] == ["touched a.py"]


async def test_undeclared_server_reminders_are_dropped(tmp_path):
    """require_declaration: a server that never declared reminders cannot push them."""
    ext = Reminders()
    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "bridge", "stdio", "--", sys.executable, "-c",
        "import bridge.examples.mcp_legacy_server as m\n"
        "orig = m.capabilities\n"
        "def caps():\n    c = orig(); c.pop('_meta'); return c\n"
        "m.capabilities = caps\nraise SystemExit(m.main())"])
    async with Client(server, mode="legacy", extensions=[ext]) as client:
        await client.call_tool("touch_file", {"path": "a.py"})
        await settle(client)
    assert ext.received == []
