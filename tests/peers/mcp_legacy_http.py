"""The MCP example server over Streamable HTTP (`bridge.examples.mcp_legacy_http`: `/mcp`, both
eras, sessions), plus what tests need to see or provoke:

- `GET /stats`: POSTs to `/mcp` so far, the sessions open, and how many `/slow` answers the client
  abandoned;
- `POST /slow`: an SSE answer that takes 30 s (a client that goes away = cancellation);
- `GET /sse`: the 2024-11-05 HTTP+SSE transport's first event, naming the endpoint to POST to;
- `GET /idle`: a stream that opens at once and says nothing until `POST /release`;
- `POST /stepped`: the `/mcp` answer as SSE, each event after the first sent only once the test
  posts `/release` (so the test knows the upstream has not sent the next one yet).

Prints `PORT <n>: …` when listening.

Usage: python -m tests.peers.mcp_legacy_http [--event-delay SECONDS]
"""
import argparse
import asyncio
import json
import sys

from aiohttp import web

from bridge.examples._http import serve_app
from bridge.examples.mcp_legacy_http import ENDPOINT, SESSIONS, make_app
from bridge.examples.mcp_legacy_server import LegacyMcpServer

#: How long a gated stream waits for `POST /release` before going on (a test that forgot to release).
GATE_TIMEOUT = 60.0


def make_test_app(event_delay: float) -> web.Application:
    stats = {"posts": 0, "slow_cancelled": 0, "idle_cancelled": 0}

    @web.middleware
    async def count_posts(request: web.Request, handler):
        if request.method == "POST" and request.path == ENDPOINT:
            stats["posts"] += 1
        return await handler(request)

    app = make_app(event_delay)
    app.middlewares.append(count_posts)

    async def slow(request: web.Request) -> web.StreamResponse:
        """An SSE answer that takes 30 s; records when the client went away (= cancellation)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for i in range(300):
                await response.write(b"event: message\ndata: " + json.dumps(
                    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}}).encode() + b"\n\n")
                await asyncio.sleep(0.1)  # the pace of a long answer (behaviour, not synchronisation)
        except (ConnectionResetError, asyncio.CancelledError):
            stats["slow_cancelled"] += 1
            raise
        return response

    async def legacy_sse(request: web.Request) -> web.StreamResponse:
        """2024-11-05 HTTP+SSE: the first event names the endpoint to POST to."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: endpoint\ndata: /messages?session_id=abc123\n\n")
        await asyncio.sleep(0.2)  # the stream stays open a moment after its event (behaviour)
        return response

    releases: asyncio.Queue[None] = asyncio.Queue()

    async def gate() -> None:
        """Wait for the test's next `POST /release`."""
        try:
            await asyncio.wait_for(releases.get(), GATE_TIMEOUT)
        except asyncio.TimeoutError:
            pass

    async def release(_: web.Request) -> web.Response:
        releases.put_nowait(None)
        return web.Response(status=204)

    async def stepped(request: web.Request) -> web.StreamResponse:
        """The `/mcp` answer as SSE, one event per `POST /release` after the first."""
        replies = LegacyMcpServer().handle(json.loads(await request.read()))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, reply in enumerate(replies):
            if i:
                await gate()
            await response.write(b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def idle(request: web.Request) -> web.StreamResponse:
        """A stream that opens at once and says nothing until released (a server-push GET stream)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await gate()
        except asyncio.CancelledError:  # the client closed the connection while the stream said nothing
            stats["idle_cancelled"] += 1
            raise
        await response.write(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/ping\"}\n\n")
        await response.write_eof()
        return response

    async def count(_: web.Request) -> web.Response:
        return web.json_response({**stats, "sessions": len(app[SESSIONS])})

    app.router.add_get("/stats", count)
    app.router.add_post("/slow", slow)
    app.router.add_get("/sse", legacy_sse)
    app.router.add_get("/idle", idle)
    app.router.add_post("/stepped", stepped)
    app.router.add_post("/release", release)
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--event-delay", type=float, default=0.0)
    sys.exit(serve_app(parser, lambda args: make_test_app(args.event_delay), "mcp test server at {url}"))
