"""The bundled legacy A2A agent (`bridge.examples.a2a_legacy_agent`) behind A2A's JSON-RPC binding:
its card at `/.well-known/agent-card.json`, JSON-RPC at `POST /a2a` (a streaming method answers as
SSE, one response per event), and `/stats` with the reminders each task received.
Prints `PORT <n>` when listening.

Usage: python -m tests.peers.a2a_legacy_http
"""
import asyncio
import json
import socket

from aiohttp import web

from bridge.examples.a2a_legacy_agent import STREAM_METHODS, LegacyA2AAgent


def make_app(port: int) -> web.Application:
    agent = LegacyA2AAgent()

    async def card(_: web.Request) -> web.Response:
        return web.json_response(agent.agent_card(f"http://127.0.0.1:{port}/a2a"))

    async def rpc(request: web.Request) -> web.StreamResponse:
        msg = json.loads(await request.read())
        replies = agent.handle(msg)
        if msg.get("method") not in STREAM_METHODS or "error" in replies[0]:
            return web.json_response(replies[0])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for reply in replies:
            await response.write(b"data: " + json.dumps(reply).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"reminders": agent.received_reminders})

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/a2a", rpc)
    app.router.add_get("/stats", stats)
    return app


async def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runner = web.AppRunner(make_app(port))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"PORT {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
