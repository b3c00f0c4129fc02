"""Claude Code channels through the real proxy (issue 13): `reminder-bridge stdio --host-dialect
claude-channel` in front of a legacy and a standard reminder server, with a host that behaves as
Claude Code does on the channel contract, the official `mcp` SDK client, a flood under a budget, and
`serve` over HTTP. Every process here is real; nothing is mocked."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from mcp import Client

from bridge.dialects.claude_channel import instructions
from bridge.examples.mcp_legacy_server import LegacyMcpServer
from tests.integration.test_policy_stdio import FLOOD, PROXY, flood, free_port, scrape, wait_for_admin
from tests.peers.channel_sdk_host import ClaudeChannelEvents, run_sdk_host
from tests.peers.claude_code_host import CLIENT_INFO, run_host
from tests.peers.flood_server import log_line
from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.peers.processes import peer, proxy
from tests.paths import ROOT

SERVERS = {"legacy": [sys.executable, "-m", "bridge.examples.mcp_legacy_server"],
           "standard": [sys.executable, "-m", "tests.peers.standard_mcp_server"]}
CHANNEL = PROXY + ["--route", "workspace", "--host-dialect", "claude-channel", "--"]
IDENTIFIER = re.compile(r"^[A-Za-z0-9_]+$")
ROLE_HINT = {"legacy": "system", "standard": "developer"}


def expected_meta(kind: str, path: str) -> dict[str, str]:
    meta = {"tags": "workspace,file_changed", "role_hint": ROLE_HINT[kind], "dedupe_key": f"file_changed:{path}",
            "ttl_turns": "2"}
    return {**meta, "source": "provider"} if kind == "legacy" else meta  # the standard wire has no source


def direct_tool_result(path: str) -> dict:
    """What the server itself answers to `touch_file`: what the host must get, untouched."""
    return LegacyMcpServer().handle({"jsonrpc": "2.0", "id": 0, "method": "tools/call",
                                     "params": {"name": "touch_file", "arguments": {"path": path}}})[-1]["result"]


def assert_channel_session(report: dict, kind: str) -> None:
    """The acceptance of issue 13 for one session through the proxy (default calls: touch a.py, b.py, echo)."""
    result = report["initialize"]["result"]
    assert result["capabilities"] == {"tools": {}, "logging": {}, "experimental": {"claude/channel": {}}}
    assert result["instructions"] == instructions("workspace")  # the server sends none of its own
    assert report["channel_listener"] is True

    events = report["channel"]
    bodies = [f"{path} changed externally; re-read it before editing." for path in ("a.py", "b.py")]
    assert [e["content"] for e in events] == bodies
    for event, path in zip(events, ("a.py", "b.py")):
        meta = dict(event["meta"])
        assert all(IDENTIFIER.match(k) and isinstance(v, str) for k, v in meta.items())
        assert meta.pop("reminder_id")
        assert meta == expected_meta(kind, path)
        assert set(event) <= {"content", "meta", "_meta"}
    assert len({e["meta"]["reminder_id"] for e in events}) == 2  # each reminder once
    assert len(report["rendered"]) == 2  # what the model sees

    calls = {r["params"]["arguments"].get("path"): r for r in report["results"] if r["method"] == "tools/call"}
    for path in ("a.py", "b.py"):
        got = {k: v for k, v in calls[path]["result"].items() if k != "resultType"}  # the SDK's model adds it
        assert got == direct_tool_result(path)  # no fallback block: no double delivery
    assert calls[None]["result"]["content"] == [{"type": "text", "text": "sync"}]
    loggers = [n.get("params", {}).get("logger") for n in report["notifications"]]
    assert loggers == ["fs", "fs"]  # ordinary logs pass; no reminder reaches the host in another form
    assert not any(n.get("method") == "notifications/reminder" for n in report["notifications"])


@pytest.mark.parametrize("kind", ["legacy", "standard"])
def test_claude_code_gets_every_reminder_once_as_a_channel_event(kind):
    report = run_host(CHANNEL + SERVERS[kind], server_name="workspace", cwd=str(ROOT))
    assert_channel_session(report, kind)
    assert report["exit_code"] == 0
    kinds = [t["kind"] for t in report["timeline"] if t["kind"] != "notification"]
    # each event arrives in the running session, before the result of the call that caused it
    assert kinds == ["response", "response", "channel", "response", "channel", "response", "response"]


@pytest.mark.parametrize("via", ["client", "session"])
async def test_the_official_sdk_receives_channel_events_through_a_notification_binding(via):
    report = await run_sdk_host(CHANNEL + SERVERS["legacy"], via=via, server_name="workspace", cwd=str(ROOT))
    assert_channel_session(report, "legacy")


def test_a_servers_own_channel_events_pass_through_as_they_are():
    calls = [{"method": "tools/call", "params": {"name": "announce", "arguments": {"text": "deploy at 15:00"}}}]
    report = run_host(CHANNEL + SERVERS["standard"], calls, server_name="workspace", cwd=str(ROOT))
    assert report["channel"] == [{"content": "deploy at 15:00", "meta": {"kind": "announcement"}}]
    assert report["results"][0]["result"] == {"content": [{"type": "text", "text": "announced"}]}


def test_without_the_flag_the_session_is_auto_and_gets_the_tool_result_fallback():
    """`auto` never picks the channel: Claude Code's handshake declares nothing, so it is a `none` host."""
    report = run_host(PROXY + ["--"] + SERVERS["legacy"], cwd=str(ROOT))
    assert "experimental" not in report["initialize"]["result"]["capabilities"]
    assert report["channel"] == []
    touched = [r for r in report["results"] if r["method"] == "tools/call"][0]["result"]["content"]
    assert len(touched) == 2 and touched[1]["text"].startswith("<system-reminder")


def test_a_flood_under_a_budget_reaches_claude_code_as_the_budgets_share(tmp_path):
    rules = tmp_path / "claude.toml"
    rules.write_text('[routes.workspace]\nprotocol = "mcp"\nhost_dialect = "claude-channel"\n'
                     '[routes.workspace.budget]\nrate = 1\nburst = 3\nkey = "session"\n')
    calls = [{"method": "tools/call", "params": {"name": "flood", "arguments": {"count": 40}}}]
    report = run_host(PROXY + ["--rules", str(rules), "--"] + FLOOD, calls, server_name="workspace", cwd=str(ROOT))
    assert [e["meta"]["reminder_id"] for e in report["channel"]] == ["r0", "r1", "r2"]
    assert len(report["rendered"]) == 3
    assert [n["params"]["data"]["seq"] for n in report["notifications"]] == list(range(40))  # every log line
    assert report["results"][0]["result"]["content"][0]["text"] == "flooded 0..39"


def test_a_flood_is_counted_as_channel_events_and_rate_limited_ones_on_the_admin_port(tmp_path):
    rules = tmp_path / "claude.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\nhost_dialect = "claude-channel"\n'
                     '[routes.ci.budget]\nrate = 1\nburst = 5\n')
    port = free_port()
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--admin", f"127.0.0.1:{port}", "--"] + FLOOD)
    try:
        init, _ = pipe.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                              "clientInfo": CLIENT_INFO})
        assert init["result"]["capabilities"] == {"tools": {}, "logging": {}, "experimental": {"claude/channel": {}}}
        wait_for_admin(port, pipe.proc)
        frames, result = flood(pipe, 2, 0, 200)
        metrics = scrape(port)
    finally:
        pipe.close()
    events = [json.loads(f) for f in frames if b"notifications/claude/channel" in f]
    logs = [f for f in frames if b'"logger":"flood"' in f]
    assert [e["params"]["meta"]["reminder_id"] for e in events] == [f"r{n}" for n in range(5)]
    assert logs == [log_line(seq).encode() for seq in range(200)]  # byte-identical, in order
    assert len(frames) == len(events) + len(logs)
    assert result["result"]["content"][0]["text"] == "flooded 0..199"
    labels = 'protocol="mcp",route="ci",action="{}",stage="translate"'
    assert metrics["reminder_bridge_reminders_total{%s}" % labels.format("channel")] == 5
    assert metrics["reminder_bridge_reminders_total{%s}" % labels.format("rate_limited")] == 195


# -- the permission relay (Claude Code >= 2.1.81) passes untouched, both ways ----------------------------
#: what Claude Code writes to a channel that declared claude/channel/permission: a prompt for a verdict
PERMISSION_REQUEST = ('{"jsonrpc": "2.0", "method": "notifications/claude/channel/permission_request", "params": '
                      '{"request_id": "tbxkq", "tool_name": "Write", "description": "write src/app.py",  '
                      '"input_preview": "{\\"file_path\\": \\"src/app.py\\"}"}}')
#: the same verdict the other way (a host relaying one it got elsewhere): unknown to the proxy, so untouched
HOST_VERDICT = ('{"method":"notifications/claude/channel/permission","params":{"request_id":"tbxkq",'
                '"behavior":"deny"},"jsonrpc":"2.0"}')


@pytest.mark.parametrize("dialect", [["--host-dialect", "claude-channel"], []], ids=["claude-channel", "auto"])
def test_the_permission_relay_passes_through_untouched_both_ways(dialect, tmp_path):
    from tests.peers.permission_channel_server import PROMPT, VERDICT

    record = tmp_path / "server-read.jsonl"
    server = [sys.executable, "-m", "tests.peers.permission_channel_server", str(record)]
    calls = [{"raw": PERMISSION_REQUEST}, {"raw": HOST_VERDICT},
             {"method": "tools/call", "params": {"name": "relay_back", "arguments": {}}}]
    report = run_host(PROXY + ["--route", "workspace", *dialect, "--"] + server, calls, server_name="workspace",
                      cwd=str(ROOT))
    experimental = report["initialize"]["result"]["capabilities"]["experimental"]
    assert experimental["claude/channel/permission"] == {} and "claude/channel" in experimental
    # host → server: Claude Code's prompt and the other verdict reach the server byte for byte
    read = record.read_bytes().splitlines()
    assert PERMISSION_REQUEST.encode() in read and HOST_VERDICT.encode() in read
    # server → host: the verdict (and a prompt the other way) reach the host byte for byte, in order
    relayed = [line for line in report["lines"] if "notifications/claude/channel/permission" in line]
    assert relayed == [VERDICT % "tbxkq", PROMPT]
    assert report["results"][0]["result"] == {"content": []} and report["exit_code"] == 0


# -- serve (HTTP): Claude Code can reach an MCP server over HTTP too ------------------------------------
@pytest.fixture
def channel_bridge():
    server = peer("tests.peers.mcp_legacy_http", "--event-delay", "0.0")
    running = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.port}",
                    "--host-dialect", "claude-channel")
    yield running
    running.stop()
    server.stop()


async def test_serve_offers_the_channel_and_streams_each_reminder_as_one_event(channel_bridge):
    events = ClaudeChannelEvents()
    async with Client(f"http://127.0.0.1:{channel_bridge.port}/mcp", mode="legacy", extensions=[events]) as c:
        offered = c.session.initialize_result
        result = await c.call_tool("touch_file", {"path": "src/lib.rs"})
        await c.call_tool("echo", {"text": "sync"})
    assert offered.capabilities.experimental == {"claude/channel": {}}
    assert offered.instructions == instructions("legacy-mcp-example")  # no route name: the server's own
    assert [e["content"] for e in events.received] == ["src/lib.rs changed externally; re-read it before editing."]
    assert events.received[0]["meta"]["dedupe_key"] == "file_changed:src/lib.rs"
    assert [x.text for x in result.content] == ["touched src/lib.rs"]
    assert result.structured_content == {"path": "src/lib.rs"}


# -- the command line says where the adapter belongs ----------------------------------------------------
def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "bridge", *args], input=stdin, capture_output=True, timeout=30,
                          cwd=ROOT)


@pytest.mark.parametrize("args, message", [
    (["stdio", "--protocol", "acp", "--host-dialect", "claude-channel", "--", "true"],
     'reminder-bridge stdio: "claude-channel" is a host dialect for MCP only (Claude Code channels), not for acp'),
    (["serve", "--protocol", "a2a", "--upstream", "http://127.0.0.1:9", "--host-dialect", "claude-channel"],
     'reminder-bridge serve: --host-dialect: "claude-channel" is a host dialect for MCP only (Claude Code channels), '
     "not for a2a (route default)"),
])
def test_the_adapter_is_refused_for_other_protocols(args, message):
    done = run_cli(*args)
    assert done.returncode == 2
    assert done.stderr.decode().strip() == message


def test_check_accepts_a_channel_route_and_refuses_one_for_acp(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[routes.workspace]\nprotocol = "mcp"\nhost_dialect = "claude-channel"\n'
                    'channel_instructions = "<channel source=\\"{server}\\"> events are CI results."\n')
    bad = tmp_path / "bad.toml"
    bad.write_text('[routes.zed]\nprotocol = "acp"\nhost_dialect = "claude-channel"\n')
    assert run_cli("check", str(good)).returncode == 0
    done = run_cli("check", str(bad))
    assert done.returncode == 1
    assert done.stdout.decode().strip() == (f'{bad}:3: routes.zed.host_dialect: "claude-channel" is a host dialect '
                                            f"for MCP only (Claude Code channels), not for acp")


# -- channel_also_tool_result: each reminder also rides the next tool result, once ------------------------
def riding_proxy(tmp_path) -> list[str]:
    rules = tmp_path / "claude.toml"
    rules.write_text('[routes.workspace]\nprotocol = "mcp"\nhost_dialect = "claude-channel"\n'
                     "channel_also_tool_result = true\n")
    return PROXY + ["--rules", str(rules), "--route", "workspace", "--"]


def carried(result: dict) -> list[str]:
    """The reminders a tool result carries after the tool's own content: one envelope line each."""
    return [line for block in result["content"][1:] for line in block["text"].split("\n")]


@pytest.mark.parametrize("dev_channels", [True, False], ids=["listening", "ignoring-channels"])
def test_each_reminder_arrives_as_a_channel_event_and_in_the_next_tool_result_only(tmp_path, dev_channels):
    """A host that ignores channel events (the VS Code extension, #43161; a mid-turn or idle session,
    #38736, #61797) still shows the model every reminder, once, in a tool result."""
    report = run_host(riding_proxy(tmp_path) + SERVERS["legacy"], server_name="workspace", dev_channels=dev_channels,
                      cwd=str(ROOT))
    # the model is told that a copy in a tool result is the same reminder
    assert report["initialize"]["result"]["instructions"] == instructions("workspace", also_in_tool_results=True)
    ids = {e["content"].split(" ")[0]: e["meta"]["reminder_id"] for e in report["channel"]}
    assert list(ids) == ["a.py", "b.py"]  # each one channel event, as without the key
    assert len(report["rendered"]) == (2 if dev_channels else 0)
    touched_a, touched_b, echo = [r["result"] for r in report["results"] if r["method"] == "tools/call"]
    for result, path in ((touched_a, "a.py"), (touched_b, "b.py")):
        assert result["content"][0] == {"type": "text", "text": f"touched {path}"}
        assert result["structuredContent"] == {"path": path}
        assert carried(result) == [f'<system-reminder id="{ids[path]}" source="provider">{path} changed externally; '
                                   "re-read it before editing.</system-reminder>"]  # its own call's, not the one before
    assert echo["content"] == [{"type": "text", "text": "sync"}]  # nothing rides twice
    assert report["exit_code"] == 0


def test_a_legacy_servers_re_sent_reminder_rides_one_tool_result(tmp_path):
    calls = [{"method": "tools/call", "params": {"name": "flood", "arguments": {"count": 1}}}] * 2
    report = run_host(riding_proxy(tmp_path) + FLOOD, calls, server_name="workspace", cwd=str(ROOT))
    assert [e["meta"]["reminder_id"] for e in report["channel"]] == ["r0", "r0"]  # the retry is sent again
    first, second = (r["result"] for r in report["results"])
    assert carried(first) == ['<system-reminder id="r0" source="host">build 0 finished</system-reminder>']
    assert second["content"] == [{"type": "text", "text": "flooded 0..0"}]


async def test_two_sessions_on_serve_never_carry_each_others_reminders(tmp_path):
    """Reminders pulled from each session's own outbox reach it as channel events between tool calls,
    and ride that session's next tool result: never another session's, though both share the route."""
    from tests.fault.test_outbox_isolation import Host, Outboxes, in_tool_result, pull_rules, until

    outboxes = Outboxes(tmp_path)
    await outboxes.ready()
    bridge = proxy("--rules", str(pull_rules(tmp_path, outboxes.port, 'host_dialect = "claude-channel"\n'
                                                                      "channel_also_tool_result = true\n")))
    a, b = Host(bridge.port, name="a"), Host(bridge.port, name="b")  # Claude Code declares nothing
    try:
        for host, event_id in ((a, "for-a"), (b, "for-b")):
            await host.start()
            host.listen()
            await outboxes.polled(host)
            outboxes.write(host, event_id)
        await until(lambda: len(channel_events(a)) == len(channel_events(b)) == 1)
        assert [e["content"] for e in channel_events(a) + channel_events(b)] == ["mail for-a", "mail for-b"]
        assert in_tool_result(await b.tool("echo", text="hi")) == ["for-b"]
        assert in_tool_result(await a.tool("echo", text="hi")) == ["for-a"]
        assert in_tool_result(await a.tool("echo", text="hi")) == in_tool_result(await b.tool("echo", text="hi")) == []
    finally:
        await a.close()
        await b.close()
        bridge.stop()
        outboxes.stop()


def channel_events(host) -> list[dict]:
    return [m["params"] for m in host.received if m.get("method") == "notifications/claude/channel"]
