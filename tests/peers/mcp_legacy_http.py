"""The bundled legacy MCP server behind Streamable HTTP, both eras, written by hand so a test
controls every byte: initialize gives an `Mcp-Session-Id`; a request whose handling produces
notifications answers as SSE (notifications first, then the result), else as JSON; GET → 405;
DELETE ends the session. Prints `PORT <n>` when listening.

Usage: python -m tests.peers.mcp_legacy_http [--event-delay SECONDS]
"""
import argparse
import asyncio
import json
import uuid

from aiohttp import web

from bridge.examples.mcp_legacy_server import LegacyMcpServer

MODERN = "io.modelcontextprotocol/protocolVersion"


def make_app(event_delay: float) -> web.Application:
    server = LegacyMcpServer()
    sessions: set[str] = set()
    stats = {"posts": 0, "slow_cancelled": 0}

    async def post(request: web.Request) -> web.StreamResponse:
        stats["posts"] += 1
        msg = json.loads(await request.read())
        if "method" not in msg or "id" not in msg:
            return web.Response(status=202)
        modern = MODERN in ((msg.get("params") or {}).get("_meta") or {})
        session = request.headers.get("Mcp-Session-Id")
        if not modern and msg["method"] != "initialize" and session not in sessions:
            return web.json_response({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32600, "message": "Session not found"}}, status=404)
        replies = server.handle(msg)
        headers = {}
        if msg["method"] == "initialize":
            session = uuid.uuid4().hex
            sessions.add(session)
            headers["Mcp-Session-Id"] = session
        if len(replies) == 1:
            return web.json_response(replies[0], headers=headers)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no", **headers})
        await response.prepare(request)
        for i, reply in enumerate(replies):
            if i and event_delay:
                await asyncio.sleep(event_delay)
            await response.write(b": keep-alive\n\n" if i == 0 else b"")
            await response.write(b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def get(_: web.Request) -> web.Response:
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})

    async def delete(request: web.Request) -> web.Response:
        sessions.discard(request.headers.get("Mcp-Session-Id", ""))
        return web.Response(status=200)

    async def slow(request: web.Request) -> web.StreamResponse:
        """An SSE answer that takes 30 s; records when the client went away (= cancellation)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for i in range(300):
                await response.write(b"event: message\ndata: " + json.dumps(
                    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}}).encode() + b"\n\n")
                await asyncio.sleep(0.1)
        except (ConnectionResetError, asyncio.CancelledError):
            stats["slow_cancelled"] += 1
            raise
        return response

    async def legacy_sse(request: web.Request) -> web.StreamResponse:
        """2024-11-05 HTTP+SSE: the first event names the endpoint to POST to."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: endpoint\ndata: /messages?session_id=abc123\n\n")
        await asyncio.sleep(0.2)
        return response

    async def idle(request: web.Request) -> web.StreamResponse:
        """A stream that opens at once and says nothing for 1.5 s (a server-push GET stream)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(1.5)
        await response.write(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/ping\"}\n\n")
        await response.write_eof()
        return response

    async def count(_: web.Request) -> web.Response:
        return web.json_response({**stats, "sessions": len(sessions)})

    app = web.Application()
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", get)
    app.router.add_delete("/mcp", delete)
    app.router.add_get("/stats", count)
    app.router.add_post("/slow", slow)
    app.router.add_get("/sse", legacy_sse)
    app.router.add_get("/idle", idle)
    return app


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--event-delay", type=float, default=0.0)
    args = parser.parse_args()
    runner = web.AppRunner(make_app(args.event_delay), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
