"""A JSON answer an upstream streams with no Content-Length, one message a line on a body that
stays open (the MCP conformance suite's reference server answers `subscriptions/listen` so), through
`reminder-bridge serve`, real sockets: each line reaches the host while the upstream still holds the
body open."""
from __future__ import annotations

import asyncio
import json

import aiohttp
from aiohttp import web

from tests.peers.processes import proxy

LINES = [{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
          "params": {"notifications": {}, "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}},
         {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
          "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 1}}}]


async def test_each_line_reaches_the_host_as_the_upstream_writes_it():
    go_on = asyncio.Event()  # the host has the first line: the upstream writes the second

    async def listen(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(json.dumps(LINES[0]).encode() + b"\n")
        await go_on.wait()
        await response.write(json.dumps(LINES[1]).encode() + b"\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/mcp", listen)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    running = await asyncio.get_running_loop().run_in_executor(
        None, lambda: proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{port}/mcp"))
    try:
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen",
                   "Accept": "application/json, text/event-stream"}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"http://127.0.0.1:{running.port}/mcp", json=body, headers=headers) as r:
                first = json.loads(await asyncio.wait_for(r.content.readline(), 20))
                go_on.set()
                second = json.loads(await asyncio.wait_for(r.content.readline(), 20))
    finally:
        running.stop()
        await runner.cleanup()
    assert first["method"] == LINES[0]["method"] and second == LINES[1]
