"""Protocol edges the proxy must not blur, with real processes and sockets (issue 19, 13–15):
an MCP GET goes upstream with its own headers (SSE resumption works through the proxy), an A2A
inject for a finished task is refused, and an ACP inject sent before the agent's `initialize`
answer waits for it."""
from __future__ import annotations

import json

import aiohttp
import pytest

from tests.peers.processes import eventually, peer, proxy

pytestmark = pytest.mark.fault

MCP_VERSION = "2025-11-25"


def rpc_body(msg_id, method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def sse_events(raw: bytes) -> list[tuple[str | None, dict | None]]:
    """(id, message) of each event of an SSE body (message None for an event with no data)."""
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields = dict(line.split(b":", 1) for line in block.split(b"\n") if b":" in line and not line.startswith(b":"))
        if fields:
            data = fields.get(b"data", b"").strip()
            event_id = fields[b"id"].strip().decode() if b"id" in fields else None
            out.append((event_id, json.loads(data) if data else None))
    return out


# -- 13: each request forwards its own end-to-end headers ------------------------------------------
async def test_a_get_on_a_known_session_reaches_the_upstream_with_its_own_headers_and_resumes_the_stream():
    server = peer("tests.peers.resumable_mcp_server")
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.port}")
    base = f"http://127.0.0.1:{bridge.port}/mcp"
    post = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "MCP-Protocol-Version": MCP_VERSION, "X-Trace": "post-1"}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            async with http.post(base, json=rpc_body(1, "initialize", protocolVersion=MCP_VERSION, capabilities={},
                                                     clientInfo={"name": "resumer", "version": "1"}),
                                 headers=post) as r:
                session = r.headers["Mcp-Session-Id"]
                await r.read()
            post["Mcp-Session-Id"] = session
            async with http.post(base, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 headers=post) as r:
                assert r.status == 202
            # the server closes this call's stream before it answers: only a resumed stream gets the answer
            async with http.post(base, json=rpc_body(2, "tools/call", name="interrupted", arguments={"text": "hi"}),
                                 headers={**post, "X-Trace": "post-2"}) as r:
                cut = sse_events(await r.read())
            assert all(message is None or "id" not in message for _, message in cut), cut
            last_seen = [event_id for event_id, _ in cut if event_id][-1]

            async def answered():
                async with http.get(f"http://127.0.0.1:{server.port}/answered") as r:
                    return 2 in await r.json()

            await eventually(answered)
            resume = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "MCP-Protocol-Version": MCP_VERSION,
                      "Last-Event-ID": last_seen, "X-Trace": "get-1"}
            async with http.get(base, headers=resume) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
                async with http.get(f"http://127.0.0.1:{server.port}/seen") as seen:
                    got = [s["headers"] for s in await seen.json() if s["method"] == "GET"][-1]
                assert (got.get("last-event-id"), got.get("x-trace"), got.get("accept")) == (
                    last_seen, "get-1", "text/event-stream"), got
                assert "content-type" not in got  # the POST's body headers stayed with the POST
                replayed: list[dict] = []
                buffer = b""
                async for chunk in r.content.iter_any():
                    buffer += chunk
                    replayed = [m for _, m in sse_events(buffer) if m is not None]
                    if any(m.get("id") == 2 for m in replayed):
                        break
        assert [m["params"]["data"] for m in replayed if m.get("method") == "notifications/message"][-1] == \
            "after the stream closed"
        answer = next(m for m in replayed if m.get("id") == 2)
        assert answer["result"]["content"] == [{"type": "text", "text": "hi"}]
    finally:
        bridge.stop()
        server.stop()
