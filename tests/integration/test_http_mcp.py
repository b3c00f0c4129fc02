"""MCP Streamable HTTP through `reminder-bridge serve`, real servers on loopback, both eras."""
from __future__ import annotations

import json
import sys

import aiohttp
import pytest
from mcp import Client

from tests.peers.processes import Running, eventually, free_port, peer, proxy
from tests.peers.mcp_host import Reminders


@pytest.fixture
def legacy_server():
    server = peer("tests.peers.mcp_legacy_http", "--event-delay", "0.0")
    yield server
    server.stop()


@pytest.fixture
def bridge(legacy_server):
    running = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{legacy_server.port}")
    yield running
    running.stop()


async def stats(server: Running) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{server.port}/stats") as response:
            return await response.json()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_gets_standard_reminders_logs_and_results(bridge, legacy_server, mode):
    ext = Reminders()
    logs = []

    async def on_log(params):
        logs.append((params.logger, params.data))

    async with Client(f"http://127.0.0.1:{bridge.port}/mcp", mode=mode, extensions=[ext], logging_callback=on_log) as c:
        result = await c.call_tool("touch_file", {"path": "src/lib.rs"})
        await c.call_tool("echo", {"text": "sync"})
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert [x.text for x in result.content] == ["touched src/lib.rs"]
    assert result.structured_content == {"path": "src/lib.rs"}
    assert [r["dedupeKey"] for r in ext.received] == ["file_changed:src/lib.rs"]
    assert ext.received[0]["body"] == "src/lib.rs changed externally; re-read it before editing."
    assert logs == [("fs", "touched src/lib.rs")]
    if mode == "legacy":  # the client's DELETE reached the server through the proxy
        assert (await stats(legacy_server))["sessions"] == 0


async def test_host_without_reminder_support_gets_them_in_tool_results_per_session(bridge):
    async with Client(f"http://127.0.0.1:{bridge.port}/mcp", mode="legacy") as c:
        result = await c.call_tool("touch_file", {"path": "a.py"})
        later = await c.call_tool("echo", {"text": "nothing pending"})
    texts = [x.text for x in result.content]
    assert texts[0] == "touched a.py" and texts[1].endswith("a.py changed externally; re-read it before editing."
                                                            "</system-reminder>")
    assert [x.text for x in later.content] == ["nothing pending"]


async def test_official_sdk_server_sessions_and_delete_pass_through(tmp_path):
    script = tmp_path / "sdk_server.py"
    script.write_text(
        "import sys\nfrom mcp.server import MCPServer\nmcp = MCPServer('sdk-demo')\n"
        "@mcp.tool()\ndef add(a: int, b: int) -> int:\n    return a + b\n"
        "mcp.run('streamable-http', host='127.0.0.1', port=int(sys.argv[1]))\n")
    port = free_port()
    import subprocess

    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async def up() -> bool:
            try:
                async with aiohttp.ClientSession() as http:
                    async with http.get(f"http://127.0.0.1:{port}/mcp") as r:
                        return r.status > 0
            except aiohttp.ClientError:
                return False

        await eventually(up, timeout=10, every=0.1)
        bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{port}")
        try:
            for mode in ("legacy", "auto"):
                async with Client(f"http://127.0.0.1:{bridge.port}/mcp", mode=mode) as c:
                    result = await c.call_tool("add", {"a": 2, "b": 3})
                    assert result.structured_content == {"result": 5}
        finally:
            bridge.stop()
    finally:
        proc.terminate()
        proc.wait(10)


async def release(server: Running) -> None:
    """Let a gated stream of tests.peers.mcp_legacy_http send its next event."""
    async with aiohttp.ClientSession() as http:
        async with http.post(f"http://127.0.0.1:{server.port}/release") as response:
            assert response.status == 204


async def test_sse_events_arrive_one_by_one_as_the_upstream_sends_them(bridge, legacy_server):
    """Each event reaches the client while the upstream has not yet sent the next one: the upstream
    sends event n+1 only when the test releases it, after event n arrived (no clock involved)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "touch_file", "arguments": {"path": "a"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"experimental": {"reminders": {}}}}}}
    arrivals = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.post(f"http://127.0.0.1:{bridge.port}/stepped", json=body,
                             headers={"Accept": "application/json, text/event-stream"}) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            async for line in response.content:
                if line.startswith(b"data:"):
                    arrivals.append(json.loads(line[5:]))
                    await release(legacy_server)  # only now does the upstream send the next event
    assert len(arrivals) == 3
    assert arrivals[0]["method"] == "notifications/reminder"  # rewritten on the fly
    assert arrivals[-1]["id"] == 1 and "result" in arrivals[-1]


async def test_a_stream_opens_at_once_though_its_first_event_is_late(bridge, legacy_server):
    """The proxy holds a streamed answer's headers to send them with the first event, but only
    when that event is already there: an idle server-push stream opens while the upstream, gated,
    has provably sent nothing (a proxy that waited for the event would wait for the gate's 60 s)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.get(f"http://127.0.0.1:{bridge.port}/idle", headers={"Accept": "text/event-stream"}) as response:
            assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
            await release(legacy_server)  # the first event is sent after the headers arrived
            data = await response.read()
    assert b"notifications/ping" in data


async def test_client_disconnect_cancels_the_upstream_request(bridge, legacy_server):
    async with aiohttp.ClientSession() as http:
        async with http.post(f"http://127.0.0.1:{bridge.port}/slow", json={"jsonrpc": "2.0", "id": 9, "method": "x"},
                             headers={"Accept": "text/event-stream"}) as response:
            first = await response.content.readline()
            assert first.startswith(b"event: message")
    # the client has gone: the proxy must close its upstream request, which the server sees
    async def cancelled() -> bool:
        return (await stats(legacy_server))["slow_cancelled"] > 0

    await eventually(cancelled, timeout=10, every=0.1)


async def test_a_host_leaving_an_idle_get_stream_closes_the_upstream_connection(bridge, legacy_server):
    """A server-push GET stream that says nothing: when the host goes, the proxy's upstream
    connection closes (not kept for another request while the upstream still streams on it)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{bridge.port}/idle", headers={"Accept": "text/event-stream"}) as response:
            assert response.status == 200

    async def closed() -> bool:
        return (await stats(legacy_server))["idle_cancelled"] > 0

    await eventually(closed, timeout=10, every=0.1)


async def test_upstream_down_gives_an_error_naming_the_route_and_cause():
    dead = free_port()
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{dead}")
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"http://127.0.0.1:{bridge.port}/mcp",
                                 json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}) as response:
                answer = await response.json()
            async with http.get(f"http://127.0.0.1:{bridge.port}/mcp") as response:
                assert response.status == 502
                assert "cannot connect" in await response.text()
        assert answer["id"] == 4 and answer["error"]["code"] == -32603
        assert "route 'default'" in answer["error"]["message"] and "cannot connect" in answer["error"]["message"]
        assert answer["error"]["data"]["route"] == "default"
    finally:
        bridge.stop()


async def test_legacy_http_sse_endpoint_is_rewritten_to_the_route(tmp_path, legacy_server):
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.old]\nprotocol = "mcp"\npath = "/old"\nupstream = "http://127.0.0.1:{legacy_server.port}"\n')
    bridge = proxy("--rules", str(rules))
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{bridge.port}/old/sse") as response:
                text = await response.text()
        assert "event: endpoint\ndata: /old/messages?session_id=abc123\n\n" in text
    finally:
        bridge.stop()


async def test_the_request_target_reaches_the_upstream_as_the_host_encoded_it():
    """`%2F` in a path and `%26` in a query value keep their meaning: the upstream gets the target the
    host wrote, not aiohttp's decoded `path` and `query_string` (which would make a path separator
    and split the parameter)."""
    import asyncio

    targets: list[bytes] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            targets.append(head.split(b" ")[1])
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    try:
        async with aiohttp.ClientSession() as http:
            for method in ("GET", "POST"):
                async with http.request(method, f"http://127.0.0.1:{bridge.port}/mcp/a%2Fb?x=a%26b&y=%20",
                                        data=b"{}" if method == "POST" else None,
                                        headers={"Content-Type": "application/json"}) as response:
                    assert response.status == 200
    finally:
        bridge.stop()
        server.close()
    assert targets == [b"/mcp/a%2Fb?x=a%26b&y=%20"] * 2
