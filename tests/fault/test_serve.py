"""`reminder-bridge serve` against hostile and unlucky clients (issue 10): every test here drives a
real proxy process over real sockets and failed on the release before the hardening.

Session isolation, linear SSE with a size limit, redacted credentials, Origin checks, slow
clients and connection caps, coalesced reminders released on HTTP sessions, SIGHUP without
rules, honest reload reports, privacy of logs, `Connection`-named headers, memory budgets, and
the rough edges of the admin port and the A2A card.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys

import aiohttp
import pytest
import websockets

from tests.peers.faulty_http import held_at, open_gate, stats_of
from tests.peers.processes import Running, eventually, free_port, peer, proxy

pytestmark = pytest.mark.fault

SSE_ACCEPT = "application/json, text/event-stream"
PRE_MODERN = {"Accept": SSE_ACCEPT}
MODERN = {"Mcp-Protocol-Version": "2026-07-28", "Accept": SSE_ACCEPT}


def body(msg_id, method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def initialize(msg_id=0, capabilities: dict | None = None) -> dict:
    return body(msg_id, "initialize", protocolVersion="2025-11-25", capabilities=capabilities or {},
                clientInfo={"name": "fault-suite", "version": "1"})


async def post(port: int, msg, headers: dict | None = None, path: str = "/mcp",
               timeout: float = 60) -> tuple[int, dict, bytes]:
    data = json.dumps(msg).encode() if isinstance(msg, dict) else msg
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
        async with http.post(f"http://127.0.0.1:{port}{path}", data=data,
                             headers={**PRE_MODERN, "Content-Type": "application/json", **(headers or {})}) as r:
            return r.status, dict(r.headers), await r.read()


def messages(raw: bytes) -> list[dict]:
    """Every JSON-RPC message of a JSON or SSE answer."""
    if raw.lstrip().startswith(b"{"):
        return [json.loads(raw)]
    return [json.loads(line[5:]) for line in raw.splitlines() if line.startswith(b"data:")]


def faulty(port: int | None = None) -> Running:
    return peer("tests.peers.faulty_http", *(["--port", str(port)] if port else []))


def serve(upstream: Running, *args: str, protocol: str = "mcp") -> Running:
    return proxy("--protocol", protocol, "--upstream", f"http://127.0.0.1:{upstream.port}", *args)


async def metrics(admin_port: int, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{admin_port}/metrics", headers=headers) as r:
            return await r.text()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample whose labels include ``labels`` (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total




@pytest.fixture
def upstream():
    running = faulty()
    yield running
    running.stop()


# -- 1. session isolation ------------------------------------------------------------------------------
async def test_unknown_session_ids_never_share_reminder_state(upstream):
    """The reproduction from the issue: a made-up session id, a read whose answer carries a
    reminder, then another made-up id's tool call. Each unknown id gets its own state."""
    bridge = serve(upstream)
    try:
        a, b = {"Mcp-Session-Id": "made-up-a"}, {"Mcp-Session-Id": "made-up-b"}
        await post(bridge.port, initialize(1), a)  # no reminder capability: host `none`, tool_result fallback
        status, _, raw = await post(bridge.port, body(2, "resources/read", uri="secret-of-a"), a)
        assert status == 200 and messages(raw)[-1]["id"] == 2
        status, _, raw = await post(bridge.port, body(3, "tools/call", name="echo", arguments={"text": "b"}), b)
        assert status == 200 and b"secret-of-a" not in raw, raw
        status, _, raw = await post(bridge.port, body(4, "tools/call", name="echo", arguments={"text": "a"}), a)
        texts = [c["text"] for c in messages(raw)[-1]["result"]["content"]]
        assert texts[0] == "a" and "secret-of-a" in texts[1]  # A's reminder reaches A, on A's next call
    finally:
        bridge.stop()


async def test_a_session_flood_evicts_only_the_evicted_state_and_counts_it(upstream):
    admin = free_port()
    bridge = serve(upstream, "--max-sessions", "20", "--admin", f"127.0.0.1:{admin}")
    try:
        _, headers, raw = await post(bridge.port, initialize(1, {"reminders": {}}))
        real = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
        _, _, raw = await post(bridge.port, body(2, "remind", count=1), real)
        assert [m.get("method") for m in messages(raw)] == ["notifications/reminder", None]

        async def flood(i: int) -> None:
            _, h, _ = await post(bridge.port, initialize(i))
            await post(bridge.port, body(i, "resources/read", uri=f"flood-secret-{i}"), {"Mcp-Session-Id": h["Mcp-Session-Id"]})

        await asyncio.gather(*(flood(i) for i in range(100, 160)))
        status, _, raw = await post(bridge.port, body(3, "tools/call", name="echo", arguments={"text": "mine"}), real)
        assert status == 200 and b"flood-secret" not in raw
        assert messages(raw)[-1]["result"]["content"] == [{"type": "text", "text": "mine"}]
        text = await metrics(admin)
        assert sample(text, "reminder_bridge_sessions_ended_total", reason="evicted") >= 40
    finally:
        bridge.stop()


async def test_session_expiry_slides_with_use_and_is_counted(upstream):
    admin = free_port()
    # idle 3 s, used every 0.5 s: a gap of 2.5 s more than the pace, so a slow answer on a loaded
    # machine cannot make the session look idle
    bridge = serve(upstream, "--session-idle", "3", "--admin", f"127.0.0.1:{admin}")
    try:
        _, headers, _ = await post(bridge.port, initialize(1, {"reminders": {}}))
        session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
        for i in range(8):  # 4 s of use, every 0.5 s: longer than the idle time, but never idle that long
            _, _, raw = await post(bridge.port, body(10 + i, "remind", count=1), session)
            assert messages(raw)[0]["method"] == "notifications/reminder", i  # the negotiated dialect is still known
            await asyncio.sleep(0.5)  # the pace of use is the stimulus (no synchronisation): under the idle time

        async def sessions() -> int:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{admin}/api/status") as r:
                    return (await r.json())["routes"][0]["sessions"]

        async def gone() -> bool:
            return await sessions() == 0

        assert await sessions() == 1
        await eventually(gone, timeout=30)  # left idle past the limit: the session is gone
        _, _, raw = await post(bridge.port, body(20, "remind", count=1), session)
        found = messages(raw)
        assert found[-1]["id"] == 20 and "notifications/reminder" not in [m.get("method") for m in found]

        async def expired() -> bool:
            return sample(await metrics(admin), "reminder_bridge_sessions_ended_total", reason="expired") >= 1

        assert await eventually(expired, timeout=10)  # counted once the table drops it (a use or the sweep)
    finally:
        bridge.stop()


async def test_two_a2a_callers_with_the_same_request_id_never_share_reminders(upstream):
    """Caller A's legacy reminder rides on a message with no task yet: the proxy injects it once
    the answer names A's task. Caller B uses the same JSON-RPC id and is answered first (the agent
    holds A's message until B has its answer)."""
    bridge = serve(upstream, "--peer-dialect", "standard", "--host-dialect", "legacy", protocol="a2a")
    try:
        def send(text: str, metadata: dict | None = None) -> dict:
            message = {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
            if metadata:
                message["metadata"] = metadata
            return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}

        reminder = {"harn": {"reminder": {"id": "ra", "body": "for A only"}}}
        held_a = asyncio.ensure_future(post(bridge.port, send("held-a", reminder), path="/a2a"))
        await eventually(lambda: held_at(upstream.port, 1))  # A's message is at the agent, unanswered
        status, _, raw = await post(bridge.port, send("fast-b"), path="/a2a")
        assert status == 200 and json.loads(raw)["result"]["task"]["id"] == "task-fast-b"
        assert not held_a.done()
        await open_gate(upstream.port)
        assert json.loads((await held_a)[2])["result"]["task"]["id"] == "task-held-a"

        async def injects():
            return (await stats_of(upstream.port))["injects"]

        assert await eventually(injects, timeout=5) == [["task-held-a", "for A only"]]
    finally:
        bridge.stop()


# -- 2. SSE: linear, bounded ---------------------------------------------------------------------------
async def test_a_huge_sse_event_relays_whole_like_the_same_bytes_as_json(upstream):
    """A 32 MiB event relays whole, as the same bytes as JSON do.  How fast is the bench's
    (bench/http_relay.py); that splitting stays linear is tests/unit/transports/test_sse.py's, on
    CPU time, so a loaded machine cannot fail this one."""
    size = 32 * 1024 * 1024
    bridge = serve(upstream)
    try:
        status, _, raw = await post(bridge.port, body(1, "bigjson", size=size), MODERN, timeout=120)
        assert status == 200 and len(raw) > size
        status, _, raw = await post(bridge.port, body(2, "bigevent", size=size), MODERN, timeout=120)
        assert status == 200 and len(raw) > size and messages(raw)[-1] == {"jsonrpc": "2.0", "id": 2, "result": {"done": True}}
    finally:
        bridge.stop()


async def test_an_sse_event_over_the_limit_fails_its_stream_cleanly_and_no_one_else(upstream):
    bridge = serve(upstream, "--max-event-bytes", "1000000")
    try:
        big = asyncio.ensure_future(post(bridge.port, body("big", "bigevent", size=3_000_000), MODERN))
        pings = [await post(bridge.port, body(i, "ping"), MODERN) for i in range(5)]
        assert all(status == 200 for status, _, _ in pings)
        status, _, raw = await big
        answer = messages(raw)
        assert status == 200 and len(answer) == 1, raw[:300]
        assert answer[0]["id"] == "big" and answer[0]["error"]["code"] == -32603
        assert "max_event_bytes" in answer[0]["error"]["message"]
        assert bridge.proc.poll() is None and "Traceback" not in "\n".join(bridge.stderr)
    finally:
        bridge.stop()


# -- 3. credentials ---------------------------------------------------------------------------------------
async def test_upstream_credentials_never_reach_clients_or_logs_and_the_query_is_forwarded():
    port = free_port()
    upstream = faulty(port)
    url = f"http://admin:PW-s3cr3t@127.0.0.1:{port}?api_key=K-s3cr3t"
    bridge = proxy("--protocol", "mcp", "--upstream", url, "--log-level", "info")
    try:
        _, _, raw = await post(bridge.port, body(1, "headers"), MODERN)
        seen = json.loads(raw)["result"]
        assert seen["query"] == "api_key=K-s3cr3t"  # the upstream's own query string is forwarded
        assert seen["headers"]["Authorization"].startswith("Basic ")
        upstream.stop()
        status, _, raw = await post(bridge.port, body(2, "tools/call", name="echo", arguments={"text": "x"}), MODERN)
        error = json.loads(raw)["error"]
        assert error["code"] == -32603 and "route 'default'" in error["message"]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{bridge.port}/mcp") as r:
                text = await r.text()
                assert r.status == 502
        bridge.stop()
        shown = [raw.decode(), text, "\n".join(bridge.stderr)]
        for secret in ("PW-s3cr3t", "K-s3cr3t"):
            for where in shown:
                assert secret not in where, where[-2000:]
        assert "api_key=***" in raw.decode() and "***@127.0.0.1" in raw.decode()
    finally:
        bridge.stop()
        upstream.stop()


# -- 4. Origin, Host and WebSocket headers ----------------------------------------------------------------
async def test_a_loopback_proxy_refuses_foreign_origins_on_http_and_websocket(upstream):
    admin = free_port()
    bridge = serve(upstream, "--admin", f"127.0.0.1:{admin}")
    ws_upstream = peer("tests.peers.ws_peer")
    ws_bridge = proxy("--protocol", "mcp", "--upstream", f"ws://127.0.0.1:{ws_upstream.port}")
    try:
        status, _, raw = await post(bridge.port, body(1, "ping"), {"Origin": "http://evil.example"})
        assert status == 403 and b"Origin" in raw
        for allowed in ({}, {"Origin": "http://localhost:5173"}, {"Origin": "http://127.0.0.1:6274"}):
            status, _, _ = await post(bridge.port, body(1, "ping"), allowed)
            assert status == 200, allowed
        assert sample(await metrics(admin), "reminder_bridge_http_refused_total", reason="origin") == 1
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"ws://127.0.0.1:{ws_bridge.port}/mcp", origin="http://evil.example"):
                pass
        assert refused.value.response.status_code == 403
        # an allowed upgrade carries the same end-to-end headers as HTTP, Origin and custom ones included
        async with websockets.connect(f"ws://127.0.0.1:{ws_bridge.port}/mcp", origin="http://localhost:3000",
                                      additional_headers={"X-Tenant": "t-1", "Authorization": "Bearer tok"}) as ws:
            await ws.send('{"jsonrpc":"2.0","id":1,"method":"test/headers"}')
            seen = {k.lower(): v for k, v in json.loads(await ws.recv())["result"]["headers"].items()}
        assert seen["x-tenant"] == "t-1" and seen["origin"] == "http://localhost:3000"
        assert seen["authorization"] == "Bearer tok" and seen["host"] == f"127.0.0.1:{ws_upstream.port}"
        # HTTP: the upstream sees its own Host, not the proxy's
        _, _, raw = await post(bridge.port, body(2, "headers"))
        assert json.loads(raw)["result"]["headers"]["Host"] == f"127.0.0.1:{upstream.port}"
    finally:
        bridge.stop()
        ws_bridge.stop()
        ws_upstream.stop()


async def test_allowed_origins_can_be_named(upstream):
    bridge = serve(upstream, "--allowed-origin", "https://app.example")
    try:
        assert (await post(bridge.port, body(1, "ping"), {"Origin": "https://app.example"}))[0] == 200
        assert (await post(bridge.port, body(1, "ping"), {"Origin": "http://localhost:5173"}))[0] == 403
    finally:
        bridge.stop()


# -- 5. slow clients and connection caps ----------------------------------------------------------------
async def test_clients_that_trickle_headers_are_cut_off(upstream):
    bridge = serve(upstream, "--header-timeout", "1")
    try:
        async def trickle() -> int:
            """How many header lines went out before the proxy cut the connection (40: never cut)."""
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
            sent = 0
            try:
                for i in range(40):
                    await asyncio.sleep(0.2)  # the stimulus: a header line every 0.2 s
                    writer.write(f"X-Slow-{i}: y\r\n".encode())
                    await writer.drain()
                    sent = i + 1
                    if reader.at_eof():
                        break
                await asyncio.wait_for(reader.read(), 5)
            except ConnectionError:
                pass
            except asyncio.TimeoutError:
                sent = 40
            finally:
                writer.close()
            return sent

        sent = await asyncio.gather(*(trickle() for _ in range(30)))
        # cut off by the 1 s header timeout, not left open: 8 s of trickling (40 lines) is a margin
        # no load reaches, and no clock of the test's is read
        assert max(sent) < 40, sent
        assert (await post(bridge.port, body(1, "ping")))[0] == 200
    finally:
        bridge.stop()


async def test_connections_over_the_cap_get_a_clear_refusal(upstream):
    admin = free_port()
    bridge = serve(upstream, "--max-connections", "10", "--header-timeout", "30", "--admin", f"127.0.0.1:{admin}")
    try:
        async def open_connections(n: int):
            async def counted():
                return sample(await metrics(admin), "reminder_bridge_connections_open") == n
            return await eventually(counted, timeout=5)

        await open_connections(0)  # the start-up probe's connection is gone
        idle = [socket.create_connection(("127.0.0.1", bridge.port)) for _ in range(10)]
        await open_connections(10)
        extra = socket.create_connection(("127.0.0.1", bridge.port), timeout=5)
        extra.sendall(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = extra.recv(4096)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503") and b"max_connections" in answer, answer
        for conn in idle[:5]:
            conn.close()

        async def served():
            try:
                return (await post(bridge.port, body(1, "ping"), timeout=5))[0] == 200
            except aiohttp.ClientError:
                return False

        assert await eventually(served, timeout=5)
        for conn in idle[5:]:
            conn.close()
    finally:
        bridge.stop()


async def test_running_out_of_file_descriptors_is_logged_once_per_interval(upstream):
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96))

    argv = [sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", "--protocol", "mcp",
            "--upstream", f"http://127.0.0.1:{upstream.port}", "--max-connections", "5000"]
    bridge = Running(argv, "stderr", preexec_fn=low_limit)
    try:
        conns = []
        for _ in range(300):
            try:
                conns.append(socket.create_connection(("127.0.0.1", bridge.port), timeout=1))
            except OSError:
                break
        async def complained() -> bool:
            return any("open files" in line or "accept" in line for line in bridge.stderr)

        await eventually(complained, timeout=10)
        # the stimulus, not synchronisation: the descriptors stay gone for 3 s more, and accept keeps
        # failing all along; the log must still hold about one line (one per QUIET_INTERVAL)
        await asyncio.sleep(3.0)
        lines = list(bridge.stderr)
        for conn in conns:
            conn.close()
        about = [line for line in lines if "open files" in line or "accept" in line]
        assert 1 <= len(about) <= 3, lines[-20:]
        assert sum(map(len, lines)) < 20_000, f"{sum(map(len, lines))} bytes of log"

        async def served():
            try:
                return (await post(bridge.port, body(1, "ping"), timeout=5))[0] == 200
            except aiohttp.ClientError:
                return False

        assert await eventually(served, timeout=10)
    finally:
        bridge.stop()


# -- 6. coalesced reminders are released on HTTP sessions ----------------------------------------------
COALESCE_RULES = """
[admin]
listen = "127.0.0.1:{admin}"
[routes.held]
protocol = "mcp"
path = "/"
upstream = "http://127.0.0.1:{port}"
[routes.held.budget]
rate = 60
burst = 1
key = "session"
over = "coalesce"
"""


async def test_coalesced_reminders_on_an_http_session_are_released_on_its_stream(upstream, tmp_path):
    admin = free_port()
    rules = tmp_path / "rules.toml"
    rules.write_text(COALESCE_RULES.format(admin=admin, port=upstream.port))
    bridge = proxy("--rules", str(rules))
    try:
        _, headers, _ = await post(bridge.port, initialize(1, {"reminders": {}}))
        session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
        received: list[dict] = []
        opened = asyncio.Event()

        async def listen() -> None:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{bridge.port}/mcp",
                                    headers={**session, "Accept": "text/event-stream"}) as r:
                    assert r.status == 200
                    opened.set()
                    async for line in r.content:
                        if line.startswith(b"data:"):
                            received.append(json.loads(line[5:]))

        stream = asyncio.ensure_future(listen())
        await asyncio.wait_for(opened.wait(), 10)  # the session's stream is open (its headers came)
        _, _, raw = await post(bridge.port, body(2, "remind", count=4), session)
        first = [m for m in messages(raw) if m.get("method") == "notifications/reminder"]
        assert len(first) == 1  # burst 1: one now, three held

        async def released():
            return len(received) == 3

        await eventually(released, timeout=8)  # one token a second comes back
        assert [m["params"]["reminder"]["dedupeKey"] for m in received] == ["k1", "k2", "k3"]
        pending = sample(await metrics(admin), "reminder_bridge_pending_reminders", queue="coalesce")
        assert pending == 0
        stream.cancel()
        await asyncio.gather(stream, return_exceptions=True)  # the host has hung up before the proxy stops
    finally:
        bridge.stop()


async def test_coalesced_reminders_ride_on_the_next_answer_without_a_stream(upstream, tmp_path):
    admin = free_port()
    rules = tmp_path / "rules.toml"
    rules.write_text(COALESCE_RULES.format(admin=admin, port=upstream.port))
    bridge = proxy("--rules", str(rules))
    try:
        _, headers, _ = await post(bridge.port, initialize(1, {"reminders": {}}))
        session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
        await post(bridge.port, body(2, "remind", count=3), session)

        async def all_released():
            text = await metrics(admin)
            return sample(text, "reminder_bridge_pending_reminders", queue="coalesce") == 0 and \
                sample(text, "reminder_bridge_pending_reminders", queue="host") == 2

        await eventually(all_released, timeout=8)
        status, headers, raw = await post(bridge.port, body(3, "ping"), session)
        found = messages(raw)
        assert headers["Content-Type"].startswith("text/event-stream")
        assert [m.get("method") for m in found] == ["notifications/reminder"] * 2 + [None]
        assert found[-1] == {"jsonrpc": "2.0", "id": 3, "result": {}}
    finally:
        bridge.stop()


# -- 7, 8. reload ----------------------------------------------------------------------------------------
async def test_sighup_without_a_rules_file_is_logged_and_ignored(upstream):
    bridge = serve(upstream)
    try:
        bridge.proc.send_signal(signal.SIGHUP)

        async def logged():
            return any("reload_skipped" in line for line in bridge.stderr)

        await eventually(logged, timeout=5)
        assert bridge.proc.poll() is None
        assert (await post(bridge.port, body(1, "ping")))[0] == 200
    finally:
        bridge.stop()


RELOAD_RULES = """
[admin]
listen = "127.0.0.1:{admin}"
[routes.{name}]
protocol = "mcp"
path = "/"
upstream = "http://127.0.0.1:{port}"
stage = "{stage}"
"""


async def test_reload_says_what_it_applied_and_what_it_refused(upstream, tmp_path):
    admin = free_port()
    rules = tmp_path / "rules.toml"
    rules.write_text(RELOAD_RULES.format(admin=admin, port=upstream.port, name="main", stage="translate"))
    bridge = proxy("--rules", str(rules))
    try:
        async def reload(text: str, event: str) -> str:
            before = len(bridge.stderr)
            rules.write_text(text)
            bridge.proc.send_signal(signal.SIGHUP)

            async def logged():
                return next((line for line in bridge.stderr[before:] if event in line), None)

            return await eventually(logged, timeout=5)

        line = await reload(RELOAD_RULES.format(admin=admin, port=upstream.port, name="other", stage="translate"),
                            "reload_refused")
        assert "main" in line
        await reload("", "reload_refused")
        line = await reload(RELOAD_RULES.format(admin=admin, port=upstream.port, name="main", stage="observe"),
                            "rules_reloaded")
        assert json.loads(line)["applied"] == ["main"]
        text = await metrics(admin)
        assert sample(text, "reminder_bridge_rules_reloads_total", result="refused") >= 2
        assert sample(text, "reminder_bridge_rules_reloads_total", result="ok") >= 1
    finally:
        bridge.stop()


# -- 9. privacy ------------------------------------------------------------------------------------------
async def test_logs_hold_no_credentials_and_no_reminder_text_at_the_default_level(upstream):
    bridge = serve(upstream)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer T0KEN-s3cr3t\x01\r\n"
                     b"Content-Length: 2\r\n\r\n{}")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer.split(b" ", 2)[1] == b"400"
        status, _, _ = await post(bridge.port, body(1, "hostile", kind="badbody", **{"as": "sse"}), MODERN)
        assert status == 200
        assert (await post(bridge.port, body(2, "ping")))[0] == 200
        bridge.stop()
        log = "\n".join(bridge.stderr)
        assert "T0KEN-s3cr3t" not in log and "B0DY-s3cr3t" not in log, log[-3000:]
        assert "invalid" in log  # the dropped reminder is still reported, without its text
    finally:
        bridge.stop()


# -- 10. Connection-named headers --------------------------------------------------------------------------
async def test_headers_named_in_connection_are_hop_by_hop_both_ways(upstream):
    bridge = serve(upstream)
    try:
        _, _, raw = await post(bridge.port, body(1, "headers"),
                               {"Connection": "keep-alive, X-Hop", "X-Hop": "hop-secret", "X-End": "kept"})
        seen = {k.lower() for k in json.loads(raw)["result"]["headers"]}
        assert "x-hop" not in seen and "x-end" in seen
        _, headers, _ = await post(bridge.port, body(2, "hopheaders"))
        names = {k.lower() for k in headers}
        assert "x-up-hop" not in names and "x-kept" in names
    finally:
        bridge.stop()


# -- 11. memory ------------------------------------------------------------------------------------------
async def test_bodies_in_flight_share_one_byte_budget(upstream):
    admin = free_port()
    bridge = serve(upstream, "--max-inflight-bytes", "4000000", "--max-body-bytes", "3000000",
                   "--admin", f"127.0.0.1:{admin}")
    try:
        refused = asyncio.Event()

        async def unfinished_body(size: int):
            """All but the end of a body, the rest only once the proxy has refused one: three in flight at once."""
            async def chunks():
                yield b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
                for _ in range(19):
                    yield b"x" * (size // 20)
                await refused.wait()
                yield b"x" * (size // 20) + b'"}}'

            return await post(bridge.port, chunks(), timeout=30)

        async def one_refused() -> None:
            async def counted() -> bool:
                return sample(await metrics(admin), "reminder_bridge_http_refused_total",
                              reason="max_inflight_bytes") >= 1
            await eventually(counted, timeout=20)
            refused.set()

        *results, _ = await asyncio.gather(*(unfinished_body(1_900_000) for _ in range(3)), one_refused())
        statuses = sorted(status for status, _, _ in results)
        assert statuses[0] == 200 and statuses[-1] == 503, statuses
        refused = next(headers for status, headers, _ in results if status == 503)
        assert int(refused["Retry-After"]) >= 1
        status, _, raw = await post(bridge.port, b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"'
                                    + b"x" * 3_100_000 + b'"}}')
        assert status == 413 and b"max_body_bytes" in raw
        assert (await post(bridge.port, body(3, "ping")))[0] == 200
    finally:
        bridge.stop()


async def test_upstream_answers_over_the_limit_are_refused_with_an_error(upstream):
    bridge = serve(upstream, "--max-response-bytes", "1000000")
    try:
        status, _, raw = await post(bridge.port, body("big", "bigjson", size=2_000_000), MODERN)
        answer = json.loads(raw)
        assert answer["id"] == "big" and answer["error"]["code"] == -32603
        assert "max_response_bytes" in answer["error"]["message"]
        assert (await post(bridge.port, body(1, "bigjson", size=500_000), MODERN))[0] == 200
    finally:
        bridge.stop()


# -- 12. rough edges -------------------------------------------------------------------------------------
def test_a_busy_admin_port_is_a_clear_error(upstream):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", "--protocol", "mcp",
                              "--upstream", f"http://127.0.0.1:{upstream.port}", "--admin", f"127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"127.0.0.1:{port}" in run.stderr and "in use" in run.stderr


async def test_the_admin_token_scheme_is_case_insensitive(upstream):
    admin = free_port()
    env = {**os.environ, "REMINDER_BRIDGE_ADMIN_TOKEN": "t0k"}
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", "--protocol", "mcp",
                             "--upstream", f"http://127.0.0.1:{upstream.port}", "--admin", f"127.0.0.1:{admin}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        async def status(authorization: str | None) -> int:
            try:
                async with aiohttp.ClientSession() as http:
                    headers = {"Authorization": authorization} if authorization else {}
                    async with http.get(f"http://127.0.0.1:{admin}/healthz", headers=headers) as r:
                        return r.status
            except aiohttp.ClientError:
                return 0

        async def up():
            return await status(None) != 0

        await eventually(up, timeout=20)
        assert await status(None) == 401
        assert await status("Bearer t0k") == 200
        assert await status("bearer t0k") == 200
        assert await status("BEARER  t0k") == 200
        assert await status("bearer wrong") == 401
    finally:
        proc.terminate()
        proc.wait(10)


async def test_a_rewritten_agent_card_gets_its_own_etag_and_no_trailing_slash(upstream):
    bridge = serve(upstream, "--peer-dialect", "legacy", protocol="a2a")
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{bridge.port}/.well-known/agent-card.json"
            async with http.get(url) as r:
                raw = await r.read()
                etag = r.headers.get("ETag")
            card = json.loads(raw)
            assert card["supportedInterfaces"][0]["url"] == f"http://127.0.0.1:{bridge.port}"
            assert etag != '"card-v1"'
            if etag is not None and not etag.startswith("W/"):
                assert etag == '"' + hashlib.sha256(raw).hexdigest()[:32] + '"'
                async with http.get(url, headers={"If-None-Match": etag}) as r:
                    assert r.status == 304
    finally:
        bridge.stop()


if sys.platform == "win32":  # pragma: no cover
    pytestmark = [pytestmark, pytest.mark.skip(reason="signals and process control are POSIX here")]
