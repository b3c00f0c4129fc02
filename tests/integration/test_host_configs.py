"""The host configurations in docs/hosts.md and docs/http.md are what each host really reads
(issue 22, point 6): Claude Desktop's `claude_desktop_config.json` holds stdio servers only (a
remote server is a connector, and needs public HTTPS), while Cursor and Claude Code also take a
`url`; and every `reminder-bridge` command line in them (docs/stdio.md's too) parses with the real CLI."""
from __future__ import annotations

import json
import re
from pathlib import PurePath

import pytest

from bridge.cli import build_parser
from tests.paths import ROOT

DOCS = ("hosts.md", "http.md", "stdio.md")
#: a section (`## Cursor`) or a bullet (`- **Cursor** (...)`) that names the host its blocks are for
HOST_NAMED = re.compile(r"^(?:## (?P<heading>.+)|- \*\*(?P<bullet>[^*]+)\*\*)")


def configs(doc: str) -> list[tuple[str, str, dict]]:
    """(host, server name, entry) for every server entry of every JSON block in ``doc``."""
    host, block, found = "", None, []
    for line in (ROOT / "docs" / doc).read_text().splitlines():
        if block is None and (named := HOST_NAMED.match(line)):
            host = (named["heading"] or named["bullet"]).strip()
        elif line.strip() == "```json":
            block = []
        elif block is not None and line.strip() == "```":
            servers = json.loads("\n".join(block))
            for table in ("mcpServers", "servers", "agent_servers"):
                found += [(host, name, entry) for name, entry in servers.get(table, {}).items()]
            block = None
        elif block is not None:
            block.append(line)
    return found


ENTRIES = [(doc, *entry) for doc in DOCS for entry in configs(doc)]


def test_the_docs_show_desktop_cursor_and_claude_code_entries():
    hosts = {host for _, host, _, _ in ENTRIES}
    assert {"Claude Desktop", "Cursor", "Claude Code"} <= hosts, hosts


@pytest.mark.parametrize("doc, host, name, entry", [e for e in ENTRIES if e[1] == "Claude Desktop"])
def test_claude_desktop_entries_are_stdio_commands(doc, host, name, entry):
    assert "url" not in entry and "command" in entry, (doc, name, entry)


@pytest.mark.parametrize("doc, host, name, entry", [e for e in ENTRIES if e[0] == "http.md"
                                                    and e[1] in ("Cursor", "Claude Code")])
def test_cursor_and_claude_code_take_the_proxy_url(doc, host, name, entry):
    assert entry["url"].startswith("http://127.0.0.1:8080/"), entry


@pytest.mark.parametrize("doc, host, name, entry", [e for e in ENTRIES if "command" in e[3]
                                                    and PurePath(e[3]["command"]).name == "reminder-bridge"])
def test_every_reminder_bridge_command_line_parses(doc, host, name, entry, monkeypatch):
    assert entry["args"][0] == "stdio"  # a host launches its servers: the proxy it launches is `stdio`
    for key, value in entry.get("env", {}).items():  # what the host sets for the proxy (`${VAR}` in --header)
        monkeypatch.setenv(key, value)
    args = build_parser().parse_args(entry["args"])  # exits, failing the test, on one that does not parse
    # the wrapped server's own command line, or the remote server's URL
    assert (args.command[:1] == ["--"] and args.command[1:]) or args.upstream, entry
