"""The legacy A2A example agent (`bridge.examples.a2a_legacy_agent`) behind A2A's JSON-RPC binding,
so `reminder-bridge serve --protocol a2a` can be tried without writing an agent:

    python -m bridge.examples.a2a_legacy_http --port 9999
    reminder-bridge serve --protocol a2a --upstream http://127.0.0.1:9999 --listen 127.0.0.1:9000

Its card is at `/.well-known/agent-card.json` (naming `/a2a` at the address the caller used, which
the proxy rewrites to its own), JSON-RPC at `POST /a2a`: `SendMessage` answers with one JSON body,
`SendStreamingMessage` as SSE, one JSON-RPC response per event. Reminders travel Harn's way, as
`metadata.harn.reminder` on the message and on a stream event.
"""
from __future__ import annotations

import argparse
import json
import sys

from aiohttp import web

from bridge.examples._http import serve_app
from bridge.examples.a2a_legacy_agent import STREAM_METHODS, LegacyA2AAgent

ENDPOINT = "/a2a"
CARD = "/.well-known/agent-card.json"
#: the agent behind the app (tests read the reminders it received)
AGENT: web.AppKey[LegacyA2AAgent] = web.AppKey("agent", LegacyA2AAgent)


def make_app() -> web.Application:
    agent = LegacyA2AAgent()

    async def card(request: web.Request) -> web.Response:
        return web.json_response(agent.agent_card(f"{request.scheme}://{request.host}{ENDPOINT}"))

    async def rpc(request: web.Request) -> web.StreamResponse:
        try:
            msg = json.loads(await request.read())
        except ValueError:
            return web.json_response({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32700, "message": "Parse error"}})
        if not isinstance(msg, dict):
            return web.json_response({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32600, "message": "Invalid Request"}})
        replies = agent.handle(msg)
        if msg.get("method") not in STREAM_METHODS or "error" in replies[0]:
            return web.json_response(replies[0])  # A2A answers JSON-RPC errors with HTTP 200
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for reply in replies:
            await response.write(b"data: " + json.dumps(reply).encode() + b"\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app[AGENT] = agent
    app.router.add_get(CARD, card)
    app.router.add_post(ENDPOINT, rpc)
    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    return serve_app(parser, lambda _: make_app(), "the legacy A2A example agent at {url} (card: {url}" + CARD
                     + ", JSON-RPC: {url}" + ENDPOINT + ")")


if __name__ == "__main__":
    sys.exit(main())
