"""What the docs name exists and does what its name promises (issue 22, point 3): every rules file in
rules/ passes `reminder-bridge check`, and each one the docs name runs a real proxy in front of
the bundled example servers, which run as the docs say (`python -m bridge.examples.… --port N`)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import aiohttp
import pytest
from mcp import Client

from tests.peers.claude_code_host import run_host
from tests.peers.mcp_host import Reminders
from tests.peers.processes import Running, free_port, proxy
from tests.paths import ROOT

RULES = sorted((ROOT / "rules").rglob("*.toml"))
HARN_REMINDER = {"id": "rem-1", "body": "main moved; rebase first.", "tags": ["git"], "dedupeKey": "main-moved"}


def test_every_shipped_rules_file_passes_check():
    assert {p.name for p in RULES} >= {"default.toml", "claude.toml", "mcp-remote.toml", "a2a.toml"}
    done = subprocess.run([sys.executable, "-m", "bridge", "check", *map(str, RULES)], capture_output=True, text=True,
                          timeout=30, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, f"ok: {len(RULES)} file(s), no problems\n"), done.stdout


def example(module: str) -> Running:
    """An example server started as docs/http.md says, on a port of the test's choosing."""
    port = free_port()
    running = Running([sys.executable, "-m", module, "--port", str(port)], "stdout")
    assert running.port == port
    return running


def with_upstreams(name: str, tmp_path: Path, replace: dict[str, str]) -> Path:
    """A copy of a shipped rules file whose upstream URLs (and commented lines) are replaced."""
    text = (ROOT / "rules" / name).read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    copy = tmp_path / name
    copy.write_text(text)
    return copy


def test_claude_toml_gives_claude_code_each_reminder_as_one_channel_event(tmp_path):
    proxy_argv = [sys.executable, "-m", "bridge", "stdio", "--rules", str(ROOT / "rules" / "claude.toml"),
                  "--route", "workspace", "--", sys.executable, "-m", "bridge.examples.mcp_legacy_server"]
    report = run_host(proxy_argv, server_name="workspace", cwd=str(ROOT))
    assert report["initialize"]["result"]["capabilities"]["experimental"] == {"claude/channel": {}}
    assert [e["content"] for e in report["channel"]] == [f"{p} changed externally; re-read it before editing."
                                                          for p in ("a.py", "b.py")]
    assert [e["meta"]["role_hint"] for e in report["channel"]] == ["developer", "developer"]  # the trust ceiling
    assert len(report["rendered"]) == 2 and report["exit_code"] == 0


async def test_mcp_remote_toml_serves_both_routes_in_front_of_the_example_server(tmp_path):
    server = example("bridge.examples.mcp_legacy_http")
    url = f"http://127.0.0.1:{server.port}/mcp"
    rules = with_upstreams("mcp-remote.toml", tmp_path, {
        "https://mcp.internal.example/mcp": url, "http://127.0.0.1:3001/mcp": url,
        '# headers.Authorization = "Bearer ${GITHUB_TOKEN}"': 'headers.Authorization = "Bearer ${GITHUB_TOKEN}"'})
    bridge = Running([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", "--rules", str(rules)],
                     "stderr", env={**os.environ, "GITHUB_TOKEN": "ghp-example"})
    try:
        standard = Reminders()
        async with Client(f"http://127.0.0.1:{bridge.port}/github", mode="legacy", extensions=[standard]) as c:
            await c.call_tool("touch_file", {"path": "README.md"})
        assert [r["dedupeKey"] for r in standard.received] == ["file_changed:README.md"]
        async with Client(f"http://127.0.0.1:{bridge.port}/files", mode="legacy") as c:  # host_dialect = "none"
            touched = await c.call_tool("touch_file", {"path": "a.py"})
        assert touched.content[-1].text.startswith('<system-reminder id="')  # the tool-result fallback
    finally:
        bridge.stop()
        server.stop()


async def test_a2a_toml_serves_the_example_agent_card_and_reminders_through_the_proxy(tmp_path):
    agent = example("bridge.examples.a2a_legacy_http")
    rules = with_upstreams("a2a.toml", tmp_path, {"http://10.0.0.7:9999": f"http://127.0.0.1:{agent.port}"})
    bridge = proxy("--rules", str(rules))
    base = f"http://127.0.0.1:{bridge.port}"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/.well-known/agent-card.json") as response:
                card = await response.json()
            body = {"jsonrpc": "2.0", "id": "1", "method": "SendStreamingMessage", "params": {"message": {
                "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "rebase"}]}}}
            async with http.post(f"{base}/a2a", json=body, headers={"A2A-Version": "1.0"}) as response:
                frames = [json.loads(line[5:]) async for line in response.content if line.startswith(b"data:")]
    finally:
        bridge.stop()
        agent.stop()
    assert card["supportedInterfaces"][0]["url"] == f"{base}/a2a"  # later requests go through the proxy
    assert "reminders" in card["capabilities"] and "_meta" not in card["capabilities"]
    updates = [f["result"]["reminderUpdate"] for f in frames if "reminderUpdate" in f["result"]]
    assert [u["reminder"]["body"] for u in updates] == ["Your last action exceeded the configured cost budget."]


@pytest.mark.parametrize("module, path", [("bridge.examples.mcp_legacy_http", "/mcp"),
                                          ("bridge.examples.a2a_legacy_http", "/.well-known/agent-card.json")])
def test_an_example_server_says_where_it_listens(module, path):
    server = example(module)
    server.stop()
    assert f"http://127.0.0.1:{server.port}{path}" in server.announced


MIGRATION = ROOT / "docs" / "migration.md"


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the ```language blocks of a Markdown text, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def test_every_rules_file_in_the_migration_guide_passes_check(tmp_path):
    """docs/migration.md gives a whole rules file for each step of its worked example."""
    blocks = fenced(MIGRATION.read_text(), "toml")
    assert len(blocks) >= 7
    files = []
    for n, block in enumerate(blocks):
        files.append(tmp_path / f"step{n}.toml")
        files[-1].write_text(block)
    done = subprocess.run([sys.executable, "-m", "bridge", "check", *map(str, files)], capture_output=True, text=True,
                          timeout=30, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, f"ok: {len(files)} file(s), no problems\n"), done.stdout


def test_the_migration_guide_shows_only_fields_api_status_has():
    """Each `/api/status` excerpt in docs/migration.md names fields a real route's status has (`…`
    marks what an excerpt leaves out)."""
    from bridge.console.feed import Feed
    from bridge.console.status import route_status
    from bridge.rules import parse_rules_text
    from bridge.telemetry import Recorder

    feed = Feed()
    shown = []
    for name, protocol in (("files", "mcp"), ("planner", "a2a")):
        recorder = Recorder(route=name)
        feed.attach([recorder])
        recorder.bridged("2026-07-28", "2025-11-25")
        settings = parse_rules_text(f'[defaults]\nprotocol = "{protocol}"\n').defaults
        recorder.status_source = lambda p=protocol, s=settings: {"protocol": p, "stage": "translate", "settings": s}
        shown.append(route_status(recorder, feed, now=feed.clock(), window_s=86400.0))

    def unknown(excerpt, real, path=""):
        if isinstance(excerpt, list) and isinstance(real, list):
            return [found for item in excerpt for found in unknown(item, real[0] if real else {}, f"{path}[]")]
        if not isinstance(excerpt, dict):
            return []
        if not isinstance(real, dict):
            return [path]
        return [found for key, value in excerpt.items() if key != "…"
                for found in ([f"{path}.{key}"] if key not in real else unknown(value, real[key], f"{path}.{key}"))]

    excerpts = [json.loads(block) for block in fenced(MIGRATION.read_text(), "json")]
    assert len(excerpts) >= 4
    for excerpt in excerpts:
        real = next(r for r in shown if r["protocol"] == ("mcp" if excerpt.get("eras") is not None else "a2a"))
        assert unknown(excerpt, real) == [], excerpt["name"]
