"""WebSocket routes: JSON-RPC text frames rewritten exactly as on stdio, close codes mirrored."""
from __future__ import annotations

import json

import pytest
import websockets

from tests.peers.processes import free_port, peer, proxy


@pytest.fixture
def ws_bridge():
    upstream = peer("tests.peers.ws_peer")
    bridge = proxy("--protocol", "mcp", "--upstream", f"ws://127.0.0.1:{upstream.port}")
    yield bridge
    bridge.stop()
    upstream.stop()


async def test_frames_are_rewritten_and_passed_like_stdio(ws_bridge):
    async with websockets.connect(f"ws://127.0.0.1:{ws_bridge.port}/mcp") as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"reminders": {}}, "clientInfo": {"name": "t", "version": "1"}}}))
        init = json.loads(await ws.recv())
        assert "reminders" in init["result"]["capabilities"] and "_meta" not in init["result"]["capabilities"]
        ping = '{"jsonrpc":"2.0","id":2,"method":"ping"}'
        await ws.send(ping)
        assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                  "params": {"name": "touch_file", "arguments": {"path": "w.py"}}}))
        frames = [json.loads(await ws.recv()) for _ in range(3)]
    assert [f.get("method") for f in frames] == ["notifications/reminder", "notifications/message", None]
    assert frames[0]["params"]["reminder"]["dedupeKey"] == "file_changed:w.py"
    assert frames[2]["result"]["content"][0]["text"] == "touched w.py"


async def test_upstream_close_code_reaches_the_host(ws_bridge):
    async with websockets.connect(f"ws://127.0.0.1:{ws_bridge.port}/mcp") as ws:
        await ws.send('{"jsonrpc":"2.0","id":1,"method":"test/close"}')
        with pytest.raises(websockets.ConnectionClosed):
            await ws.recv()
    assert ws.close_code == 4001 and ws.close_reason == "asked to close"


async def test_unreachable_upstream_closes_with_1011():
    dead = free_port()
    bridge = proxy("--protocol", "mcp", "--upstream", f"ws://127.0.0.1:{dead}")
    try:
        async with websockets.connect(f"ws://127.0.0.1:{bridge.port}/mcp") as ws:
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
        assert ws.close_code == 1011
        assert ws.close_reason == f"upstream ws://127.0.0.1:{dead}/mcp: cannot connect (Connection refused)"
    finally:
        bridge.stop()
