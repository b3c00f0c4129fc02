"""The bundled legacy MCP server (bridge/examples/mcp_legacy_server.py) behind Streamable HTTP, for the
Compose example (deploy/compose.yaml mounts this file into the reminder-bridge image, which already
contains the `bridge` package and aiohttp).

POST /mcp: one JSON-RPC message; answered as JSON, or as SSE when the server has notifications to send
first (`touch_file` sends a legacy reminder).  `initialize` hands out an `Mcp-Session-Id`; any session id
is accepted afterwards, since every proxy replica forwards to this one server.  GET /mcp → 405,
DELETE /mcp → 200, GET /healthz → 200 (the container's health check).

    python example_mcp_server.py --listen 0.0.0.0:3000
"""
from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from aiohttp import web

from bridge.examples.mcp_legacy_server import LegacyMcpServer


def make_app() -> web.Application:
    server = LegacyMcpServer()

    async def post(request: web.Request) -> web.StreamResponse:
        try:
            msg = json.loads(await request.read())
        except ValueError:
            return web.json_response({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32700, "message": "Parse error"}}, status=400)
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            return web.Response(status=202)  # notifications and responses
        replies = server.handle(msg)
        headers = {"Mcp-Session-Id": uuid.uuid4().hex} if msg["method"] == "initialize" else {}
        if len(replies) == 1:
            return web.json_response(replies[0], headers=headers)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               **headers})
        await response.prepare(request)
        for reply in replies:
            await response.write(b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def not_allowed(_: web.Request) -> web.Response:
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", not_allowed)
    app.router.add_delete("/mcp", ok)
    app.router.add_get("/healthz", ok)
    return app


async def main(listen: str) -> None:
    host, _, port = listen.rpartition(":")
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", default="0.0.0.0:3000", metavar="HOST:PORT")
    asyncio.run(main(parser.parse_args().listen))
