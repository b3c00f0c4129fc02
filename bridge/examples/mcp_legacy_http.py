"""The legacy MCP example server (`bridge.examples.mcp_legacy_server`) over MCP Streamable HTTP,
so `reminder-bridge serve` can be tried without writing a server:

    python -m bridge.examples.mcp_legacy_http --port 3000
    reminder-bridge serve --protocol mcp --upstream http://127.0.0.1:3000/mcp

One endpoint, `/mcp`, in both eras of the transport:

- 2025-11-25: the `initialize` answer carries a new `Mcp-Session-Id`; every later request must
  carry it (an unknown one gets 404, so the host starts again), and DELETE ends the session.
- 2026-07-28: a request with `_meta["io.modelcontextprotocol/protocolVersion"]` is self-contained
  and needs no session.

A request whose handling sends notifications first (`tools/call touch_file`: the legacy reminder,
`notifications/message` with `_meta.harn.reminder`, and a log line) is answered as an SSE stream,
the notifications then the result; any other request as one JSON body; a notification or a
response with 202. There is no GET stream (405), which the transport allows. `GET /healthz`
answers 200 (a container's health check). It listens on loopback only unless told otherwise.

`--any-session` accepts any session id, or none, after `initialize` (deploy/compose.yaml runs it
so behind a fleet of proxies that share one server).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid

from aiohttp import web

from bridge.examples._http import serve_app
from bridge.examples.mcp_legacy_server import PROTOCOL_VERSION_KEY, LegacyMcpServer

ENDPOINT = "/mcp"
#: the session ids this app has handed out (tests count them)
SESSIONS: web.AppKey[set[str]] = web.AppKey("sessions", set)


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}},
                             status=status)


def make_app(event_delay: float = 0.0, any_session: bool = False) -> web.Application:
    """The server as an aiohttp app; ``event_delay``: seconds between the events of an SSE answer
    (to watch them arrive one at a time); ``any_session``: no request is refused for its session."""
    server = LegacyMcpServer()
    sessions: set[str] = set()

    async def post(request: web.Request) -> web.StreamResponse:
        try:
            msg = json.loads(await request.read())
        except ValueError:
            return _error(400, -32700, "Parse error: the body is not JSON")
        if not isinstance(msg, dict):
            return _error(400, -32600, "Invalid Request: this server takes one JSON-RPC object per POST")
        if "method" not in msg or "id" not in msg:
            return web.Response(status=202)  # a notification or a response: accepted, nothing to answer
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        modern = PROTOCOL_VERSION_KEY in (params.get("_meta") or {})
        session = request.headers.get("Mcp-Session-Id")
        if not (modern or any_session) and msg["method"] != "initialize" and session not in sessions:
            return _error(404, -32600, "Session not found: send initialize first")
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
        await response.write(b": keep-alive\n\n")
        for i, reply in enumerate(replies):
            if i and event_delay:
                await asyncio.sleep(event_delay)
            await response.write(b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def get(_: web.Request) -> web.Response:
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})

    async def delete(request: web.Request) -> web.Response:
        sessions.discard(request.headers.get("Mcp-Session-Id", ""))
        return web.Response(status=200)

    async def healthy(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application()
    app[SESSIONS] = sessions
    app.router.add_post(ENDPOINT, post)
    app.router.add_get(ENDPOINT, get)
    app.router.add_delete(ENDPOINT, delete)
    app.router.add_get("/healthz", healthy)
    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--event-delay", type=float, default=0.0, metavar="SECONDS",
                        help="seconds between the events of an SSE answer (default 0)")
    parser.add_argument("--any-session", action="store_true",
                        help="accept any session id (or none) after initialize, as behind a fleet of proxies")
    return serve_app(parser, lambda args: make_app(args.event_delay, args.any_session),
                     "the legacy MCP example server at {url}" + ENDPOINT + " (Streamable HTTP, 2025-11-25 sessions "
                     "and 2026-07-28)")


if __name__ == "__main__":
    sys.exit(main())
