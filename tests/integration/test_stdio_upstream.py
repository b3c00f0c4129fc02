"""`reminder-bridge stdio --upstream URL`, real processes: the `mcp` SDK's stdio client as the host,
the proxy in front of a remote MCP server over HTTP: the SDK's own Streamable HTTP server (both
eras, its event store for resumption), the SDK's 2024-11-05 SSE server, and the bundled legacy
example server (which declares its Harn reminders)."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.shared.exceptions import MCPError

from bridge.transports.remote import MAX_OUTBOUND_BYTES, MAX_POSTS
from tests.peers.faulty_http import held_at, open_gate, stats_of
from tests.peers.mcp_host import Reminders
from tests.peers.processes import eventually, free_port, get_json, peer

SECRET = "s3cr3t-t0ken-value"


@pytest.fixture(scope="module")
def sdk_server():
    server = peer("tests.peers.sdk_http_server")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def legacy_server():
    server = peer("tests.peers.mcp_legacy_http")
    yield server
    server.stop()


def rules(tmp_path: Path, text: str = "") -> str:
    path = tmp_path / "rules.toml"
    path.write_text("[defaults]\nrequire_declaration = false\n" + text)  # the SDK cannot declare Harn reminders
    return str(path)


def host(tmp_path: Path, url: str, *options: str, env: dict[str, str] | None = None) -> tuple[object, Path]:
    """The SDK's stdio client launching the proxy (in the SDK's default environment, plus ``env``);
    the proxy's stderr goes to a file the test reads."""
    log = tmp_path / "proxy-stderr.txt"
    params = StdioServerParameters(command=sys.executable, args=["-m", "bridge", "stdio", "--upstream", url,
                                                                 "--log-level", "info", *options],
                                   env={**get_default_environment(), **env} if env else None)
    return stdio_client(params, errlog=log.open("a")), log


async def settle(client: Client) -> None:
    """A round trip after the call, so notifications sent before its result have been dispatched."""
    await client.call_tool("echo", {"text": "sync"})


def log_catcher() -> tuple[list[Any], Any, asyncio.Event]:
    """A host's log callback: what it got, the callback, and an event set at the first message."""
    logs: list[Any] = []
    logged = asyncio.Event()

    async def on_log(params: Any) -> None:
        logs.append(params)
        logged.set()

    return logs, on_log, logged


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_host_lists_and_calls_tools_of_an_sdk_server_in_both_eras(sdk_server, tmp_path, mode):
    transport, _ = host(tmp_path, f"http://127.0.0.1:{sdk_server.port}/mcp")
    async with Client(transport, mode=mode) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hello"})
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert {"echo", "remind", "announce"} <= {tool.name for tool in tools.tools}
    assert [c.text for c in result.content] == ["hello"]
    seen = await get_json(sdk_server.port, "/seen")
    if mode == "auto":  # 2026-07-28: self-contained requests, the headers the SDK server checks them against
        calls = [s["headers"] for s in seen if s["headers"].get("mcp-method") == "tools/call"]
        assert calls and calls[-1]["mcp-name"] == "echo" and calls[-1]["mcp-protocol-version"] == "2026-07-28"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_legacy_reminder_reaches_a_standard_host_as_notifications_reminder(sdk_server, tmp_path, mode):
    ext = Reminders()
    transport, _ = host(tmp_path, f"http://127.0.0.1:{sdk_server.port}/mcp", "--rules", rules(tmp_path))
    async with Client(transport, mode=mode, extensions=[ext]) as client:
        result = await client.call_tool("remind", {"path": "src/lib.rs"})
        await settle(client)
    assert [c.text for c in result.content] == ["touched src/lib.rs"]
    assert [(r["body"], r["dedupeKey"]) for r in ext.received] == [
        ("src/lib.rs changed externally; re-read it before editing.", "file_changed:src/lib.rs")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_legacy_reminder_reaches_a_host_without_support_in_the_tool_result(sdk_server, tmp_path, mode):
    transport, _ = host(tmp_path, f"http://127.0.0.1:{sdk_server.port}/mcp", "--rules", rules(tmp_path))
    async with Client(transport, mode=mode) as client:
        result = await client.call_tool("remind", {"path": "a.py"})
    texts = [c.text for c in result.content]
    assert texts[0] == "touched a.py"
    assert texts[1].startswith("<system-reminder") and "a.py changed externally" in texts[1]


async def test_a_declared_legacy_server_needs_no_rules(legacy_server, tmp_path):
    """The bundled example declares `_meta.harn.reminders`: the default rules take its reminders."""
    ext = Reminders()
    transport, _ = host(tmp_path, f"http://127.0.0.1:{legacy_server.port}/mcp")
    async with Client(transport, mode="legacy", extensions=[ext]) as client:
        await client.call_tool("touch_file", {"path": "b.py"})
        await settle(client)
    assert [r["dedupeKey"] for r in ext.received] == ["file_changed:b.py"]


async def test_the_get_stream_delivers_the_servers_own_messages(sdk_server, tmp_path):
    logs, on_log, logged = log_catcher()
    transport, log = host(tmp_path, f"http://127.0.0.1:{sdk_server.port}/mcp")
    async with Client(transport, mode="legacy", logging_callback=on_log) as client:
        await client.call_tool("announce", {"text": "on the session's stream"})
        await asyncio.wait_for(logged.wait(), 30)  # the GET stream's message races the call's answer
    assert [(entry.logger, entry.data) for entry in logs] == [("announce", "on the session's stream")]
    seen = await get_json(sdk_server.port, "/seen")
    assert seen[-1]["method"] == "DELETE"  # the session ended with the host
    session = seen[-1]["headers"]["mcp-session-id"]
    gets = [s["headers"] for s in seen if s["method"] == "GET" and s["headers"].get("mcp-session-id") == session]
    assert gets and gets[0]["accept"] == "text/event-stream"


async def test_a_get_stream_the_server_closes_is_reopened_from_its_last_event(sdk_server, tmp_path):
    logs, on_log, logged = log_catcher()
    transport, log = host(tmp_path, f"http://127.0.0.1:{sdk_server.port}/mcp")
    async with Client(transport, mode="legacy", logging_callback=on_log) as client:
        await client.call_tool("announce", {"text": "the stream is open"})
        await asyncio.wait_for(logged.wait(), 30)  # a message on the GET stream says it is open
        await client.call_tool("hang_up", {"text": "said while the stream was closed"})
        deadline = time.monotonic() + 20  # the proxy waits 1 s (no `retry` on this stream) before it reopens it
        while len(logs) < 2 and time.monotonic() < deadline:
            await settle(client)
    assert [entry.data for entry in logs] == ["the stream is open", "said while the stream was closed"]
    seen = await get_json(sdk_server.port, "/seen")
    session = next(s["headers"]["mcp-session-id"] for s in reversed(seen) if s["method"] == "DELETE")  # this test's
    gets = [s["headers"] for s in seen if s["method"] == "GET" and s["headers"].get("mcp-session-id") == session]
    assert len(gets) >= 2 and "last-event-id" in gets[-1]


async def test_a_stream_the_server_closes_is_resumed_with_last_event_id(sdk_server, tmp_path):
    transport, _ = host(tmp_path, f"http://127.0.0.1:{sdk_server.port}/mcp")
    async with Client(transport, mode="legacy") as client:
        result = await client.call_tool("interrupted", {"text": "answered after resumption"})
    assert [c.text for c in result.content] == ["answered after resumption"]
    seen = await get_json(sdk_server.port, "/seen")
    assert any("last-event-id" in s["headers"] for s in seen if s["method"] == "GET")


def cause_of(raised: BaseException) -> MCPError:
    """The JSON-RPC error the SDK raised, out of the exception groups its task groups wrap it in."""
    while isinstance(raised, BaseExceptionGroup):
        raised = raised.exceptions[0]
    assert isinstance(raised, MCPError), raised
    return raised


async def test_auth_headers_reach_the_server_and_never_the_log(sdk_server, tmp_path):
    url = f"http://user:pw-{SECRET}@127.0.0.1:{sdk_server.port}/mcp?key={SECRET}"
    transport, log = host(tmp_path, url, "--header", "Authorization: Bearer ${UPSTREAM_TOKEN}",
                          "--header", f"X-Api-Key: {SECRET}", "--log-level", "debug",
                          env={"UPSTREAM_TOKEN": SECRET})
    async with Client(transport, mode="legacy") as client:
        await client.call_tool("echo", {"text": "with auth"})
    seen = await get_json(sdk_server.port, "/seen")
    mine = [s["headers"] for s in seen if s["headers"].get("x-api-key") == SECRET]
    assert mine and all(h["authorization"] == f"Bearer {SECRET}" for h in mine)  # the flag over the userinfo
    text = log.read_text()
    assert "upstream" in text and "127.0.0.1" in text  # it did log about the upstream ...
    assert SECRET not in text and "pw-" not in text  # ... with none of its secrets


async def test_an_upstream_that_dies_mid_call_answers_the_host_with_an_error(tmp_path):
    server = peer("tests.peers.sdk_http_server")
    try:
        transport, log = host(tmp_path, f"http://127.0.0.1:{server.port}/mcp")
        async with Client(transport, mode="legacy") as client:
            with pytest.raises(MCPError) as died:
                await client.call_tool("die", {})
            with pytest.raises(MCPError) as after:
                await client.call_tool("echo", {"text": "nobody there"})
    finally:
        server.stop()
    assert died.value.error.code == -32603 and died.value.error.message.startswith("reminder-bridge route 'default'")
    assert after.value.error.data["cause"].startswith("cannot connect (")  # refused, or reset on a kept connection
    assert "upstream_error" in log.read_text()


async def test_an_upstream_that_is_not_there_answers_initialize_with_an_error(tmp_path):
    transport, _ = host(tmp_path, f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(BaseException) as raised:
        async with Client(transport, mode="legacy"):
            pass
    error = cause_of(raised.value).error
    assert error.code == -32603 and error.data["cause"] == "cannot connect (Connection refused)"


async def test_a_2024_11_05_sse_server_of_the_sdk(tmp_path):
    """The SDK still ships the old HTTP+SSE server (`MCPServer.sse_app`): answers come on its stream."""
    server = peer("tests.peers.sdk_http_server", "--sse")
    try:
        ext = Reminders()
        for url in (f"http://127.0.0.1:{server.port}/sse", f"http://127.0.0.1:{server.port}/sse?x=1"):
            transport, log = host(tmp_path, url, "--rules", rules(tmp_path))
            async with Client(transport, mode="legacy", extensions=[ext]) as client:
                tools = await client.list_tools()
                result = await client.call_tool("remind", {"path": "c.py"})
                await settle(client)
            assert "remind" in {tool.name for tool in tools.tools}
            assert [c.text for c in result.content] == ["touched c.py"]
        assert [r["dedupeKey"] for r in ext.received] == ["file_changed:c.py"] * 2
        seen = await get_json(server.port, "/seen")
        assert any(s["method"] == "POST" and s["path"].startswith("/messages") for s in seen)
    finally:
        server.stop()


async def test_auto_finds_the_sse_transport_when_the_url_refuses_posts(tmp_path):
    server = peer("tests.peers.sdk_http_server", "--sse", "/events")
    try:
        # the path does not say /sse: only the first POST's 405 tells
        transport, log = host(tmp_path, f"http://127.0.0.1:{server.port}/events")
        async with Client(transport, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "found"})
        assert [c.text for c in result.content] == ["found"]
    finally:
        server.stop()


def test_options_that_do_not_go_with_an_upstream_are_refused():
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bridge", "stdio", *args], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)

    both = run("--upstream", "http://127.0.0.1:9/mcp", "--", "true")
    assert both.returncode == 2 and "not both" in both.stderr
    header = run("--header", "X-A: b", "--", "true")
    assert header.returncode == 2 and "--header is for --upstream" in header.stderr
    websocket = run("--upstream", "ws://127.0.0.1:9/mcp")
    assert websocket.returncode == 2 and "http(s)://" in websocket.stderr
    acp = run("--upstream", "http://127.0.0.1:9/mcp", "--protocol", "acp")
    assert acp.returncode == 2 and "ACP" in acp.stderr


async def test_a_route_with_an_upstream_and_no_command_runs_against_it(sdk_server, tmp_path):
    path = tmp_path / "remote.toml"
    path.write_text(f'[routes.remote]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{sdk_server.port}/mcp"\n'
                    '[routes.remote.headers]\nX-Route = "from-the-rules"\n')
    params = StdioServerParameters(command=sys.executable, args=["-m", "bridge", "stdio", "--rules", str(path),
                                                                 "--route", "remote"])
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("echo", {"text": "routed"})
    assert [c.text for c in result.content] == ["routed"]
    seen = await get_json(sdk_server.port, "/seen")
    assert any(s["headers"].get("x-route") == "from-the-rules" for s in seen)


class RawHost:
    """A host that writes JSON-RPC lines to the proxy itself (the SDK's client cannot flood)."""

    def __init__(self, url: str, *options: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "bridge", "stdio", "--upstream", url, *options],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = self.proc.stdout

    def send(self, *messages: dict) -> None:
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.lines.readline()
        assert line, f"the proxy closed its output: {self.proc.stderr.read().decode()[-2000:]}"
        return json.loads(line)

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert self.read()["id"] == 1

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def faulty():
    server = peer("tests.peers.faulty_http")
    yield server
    server.stop()


@pytest.mark.parametrize("count, size", [(40, 512 * 1024), (3000, 0)], ids=["bytes", "number"])
async def test_host_messages_waiting_for_their_post_are_bounded(faulty, count, size):
    """Requests the upstream holds: the proxy takes about 8 MiB of them (or 1024 small ones), then
    stops reading the host until they are answered (its stdin pipe fills, the host's write blocks)."""
    raw = RawHost(f"http://127.0.0.1:{faulty.port}/mcp")
    try:
        raw.initialize()
        pad = "x" * size
        flood = [{"jsonrpc": "2.0", "id": 100 + i, "method": "held", "params": {"pad": pad}} for i in range(count)]
        writer = threading.Thread(target=raw.send, args=flood, daemon=True)
        writer.start()
        await eventually(lambda: held_above(faulty.port, 8))
        writer.join(3)  # proving a negative: nothing the host does can make the proxy read on while held
        assert writer.is_alive()  # more written than the proxy takes and the pipe holds: the host waits
        assert (await stats_of(faulty.port))["held"] <= min(MAX_POSTS, MAX_OUTBOUND_BYTES // max(size, 1) + 1)
        await open_gate(faulty.port)
        writer.join(60)
        assert not writer.is_alive()
        assert sorted(raw.read()["id"] for _ in flood) == [m["id"] for m in flood]  # every one answered
    finally:
        raw.close()


async def held_above(port: int, n: int) -> bool:
    return (await stats_of(port))["held"] > n


async def test_a_request_the_upstream_never_answers_is_answered_when_the_host_says_goodbye(faulty):
    raw = RawHost(f"http://127.0.0.1:{faulty.port}/mcp")
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "held", "params": {}})
        await eventually(lambda: held_at(faulty.port, 1))
        raw.proc.stdin.close()  # the host's goodbye: the answer gets STOP_GRACE, then the proxy ends
        answer = raw.read()
        assert answer["id"] == 2 and answer["error"]["code"] == -32000
        assert "stopped before" in answer["error"]["message"]
        assert raw.proc.wait(10) == 0
    finally:
        raw.close()


async def test_the_admin_port_says_ready_while_the_upstream_session_runs(faulty):
    admin = free_port()
    raw = RawHost(f"http://127.0.0.1:{faulty.port}/mcp", "--admin", f"127.0.0.1:{admin}")
    try:
        raw.initialize()

        async def ready() -> str | None:
            async with aiohttp.ClientSession() as http:
                try:
                    async with http.get(f"http://127.0.0.1:{admin}/readyz") as r:
                        return await r.text() if r.status == 200 else None
                except aiohttp.ClientError:
                    return None

        assert await eventually(ready) == "ready\n"
    finally:
        raw.close()


async def test_sigterm_ends_the_session_at_once_and_answers_what_waits(faulty):
    raw = RawHost(f"http://127.0.0.1:{faulty.port}/mcp")
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "held", "params": {}})
        await eventually(lambda: held_at(faulty.port, 1))
        raw.proc.send_signal(signal.SIGTERM)
        answer = raw.read()
        assert answer["id"] == 2 and answer["error"]["code"] == -32000
        assert raw.proc.wait(10) == 128 + signal.SIGTERM
    finally:
        raw.close()


async def test_the_outbox_add_on_polls_a_remote_server_through_its_own_posts(tmp_path):
    """The stdio route's add-ons come along: an outbox on the remote server is read by the proxy's
    own requests (POSTs of their own, in the host's session) and its events reach the host."""
    from tests.integration.test_outbox import _accepts, event, until
    from tests.peers import outbox_server

    db = str(tmp_path / "server.db")
    outbox_server.connect(db).close()
    port = free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "tests.peers.outbox_server", db, "--http", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = tmp_path / "outbox.toml"
    path.write_text('[routes.acme]\nprotocol = "mcp"\n[routes.acme.outbox]\nresource = "acme://notifications"\n'
                    'store = "proxy.sqlite3"\npoll_floor_ms = 100\npoll_ceiling_ms = 300\n')
    try:
        await until(lambda: _accepts(port), "the upstream to listen")
        ext = Reminders()
        transport, _ = host(tmp_path, f"http://127.0.0.1:{port}/mcp", "--rules", str(path), "--route", "acme",
                            "--state-dir", str(tmp_path / "state"))
        async with Client(transport, mode="legacy", extensions=[ext]) as client:
            await until(lambda: outbox_server.reads(db), "the bootstrap read")
            outbox_server.write_event(db, event("u1"))
            await until(lambda: len(ext.received) == 1, "the event as a reminder")
            assert [c.text for c in (await client.call_tool("echo", {"text": "hi"})).content] == ["hi"]
        assert ext.received[0]["_meta"]["reminder-bridge/event"]["event"]["eventId"] == "u1"
    finally:
        upstream.terminate()
        upstream.wait(10)


async def test_a_server_that_lost_the_session_is_initialized_again_and_the_request_goes_again(tmp_path):
    """The server restarted: it answers the old session with 404 (MCP: only a new initialize starts
    another, which a stdio host cannot know to send). The proxy sends the host's initialize and
    initialized again, takes the new session, and sends the request again: the host sees no error."""
    port = free_port()
    server = peer("tests.peers.mcp_legacy_http", "--port", str(port))
    raw = RawHost(f"http://127.0.0.1:{port}/mcp")
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.stop()
        server = peer("tests.peers.mcp_legacy_http", "--port", str(port))
        for n in (2, 3):
            raw.send({"jsonrpc": "2.0", "id": n, "method": "tools/list"})
            got = raw.read()
            assert got["id"] == n and "touch_file" in {tool["name"] for tool in got["result"]["tools"]}
        assert (await get_json(port, "/stats"))["sessions"] == 1  # one session opened again, not one per request
        raw.proc.stdin.close()
        assert raw.proc.wait(10) == 0
        log = raw.proc.stderr.read().decode()
        assert log.count("upstream_session_reopened") == 1 and "upstream_session_lost" not in log
    finally:
        raw.close()
        server.stop()


async def test_an_sdk_server_restarted_under_an_sdk_host_gets_the_session_and_its_get_stream_again(tmp_path):
    port = free_port()
    server = peer("tests.peers.sdk_http_server", "--port", str(port))
    try:
        logs, on_log, logged = log_catcher()
        transport, log = host(tmp_path, f"http://127.0.0.1:{port}/mcp")
        async with Client(transport, mode="legacy", logging_callback=on_log) as client:
            assert [c.text for c in (await client.call_tool("echo", {"text": "before"})).content] == ["before"]
            server.stop()
            server = peer("tests.peers.sdk_http_server", "--port", str(port))
            result = await client.call_tool("announce", {"text": "on the new session's stream"})
            assert [c.text for c in result.content] == ["announced"]
            await asyncio.wait_for(logged.wait(), 30)  # the new session's GET stream carries it
        assert [entry.data for entry in logs] == ["on the new session's stream"]
        seen = await get_json(port, "/seen")  # the new server's: the call it refused (404), the opening
        posts = [s["headers"].get("mcp-session-id") for s in seen if s["method"] == "POST"]  # again, the call again
        session = next(s["headers"]["mcp-session-id"] for s in seen if s["method"] == "GET")
        assert posts[0] not in (None, session) and posts[1:4] == [None, session, session]
        assert "upstream_session_reopened" in log.read_text()
    finally:
        server.stop()


@pytest.mark.parametrize("request_", [{"method": "hang", "params": {}},
                                      {"method": "stream", "params": {"count": 3, "held": True}}],
                         ids=["json", "stream"])
async def test_a_request_the_upstream_does_not_answer_in_time_gets_an_error_naming_the_timeout(faulty, request_):
    """--upstream-timeout: the host gets the error in its time (a JSON answer that never comes, a stream
    that stops between events), and the session goes on."""
    url = f"http://127.0.0.1:{faulty.port}/mcp"
    raw = RawHost(url, "--upstream-timeout", "2")  # (the initialize before must come in time too, under load)
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 2, **request_})
        got = raw.read()
        while "method" in got:  # the stream's first progress notification
            got = raw.read()
        assert got["id"] == 2 and got["error"]["code"] == -32603
        assert got["error"]["data"] == {"route": "default", "upstream": url,
                                        "cause": "did not answer within 2 s (--upstream-timeout)"}
        assert url in got["error"]["message"] and "--upstream-timeout" in got["error"]["message"]
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert raw.read() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    finally:
        raw.close()


async def test_a_2024_11_05_answer_that_does_not_come_in_time_gets_the_timeouts_error(tmp_path):
    """On the old transport the answer comes on the one stream: the request's deadline is a timer."""
    server = peer("tests.peers.sdk_http_server", "--sse")
    try:
        url = f"http://127.0.0.1:{server.port}/sse"
        transport, _ = host(tmp_path, url, "--upstream-timeout", "3")
        async with Client(transport, mode="legacy") as client:
            with pytest.raises(MCPError) as late:
                await client.call_tool("wait", {"seconds": 30})
            assert [c.text for c in (await client.call_tool("echo", {"text": "still on"})).content] == ["still on"]
        assert late.value.error.data == {"route": "default", "upstream": url,
                                         "cause": "did not answer within 3 s (--upstream-timeout)"}
    finally:
        server.stop()


async def test_a_host_that_closes_stdout_ends_the_proxy_at_once(faulty):
    raw = RawHost(f"http://127.0.0.1:{faulty.port}/mcp")
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "held", "params": {}})
        await eventually(lambda: held_at(faulty.port, 1))
        raw.proc.stdout.close()  # the host is gone: nothing the upstream says can reach it
        assert raw.proc.wait(10) == 0
        assert "host_gone" in raw.proc.stderr.read().decode()
    finally:
        raw.close()
