"""A WebSocket route: JSON-RPC text frames through the flow exactly as on stdio, binary frames and
close codes passed as they are, the upgrade carrying the same end-to-end headers as HTTP."""
from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import websockets
from aiohttp import web

from bridge.pipeline.commands import HOST, PEER, Write
from bridge.transports.driver import FlowDriver
from bridge.transports.forwarding import redact
from bridge.transports.http.own_calls import OwnCalls, through, written
from bridge.transports.http.routes import HttpRoute
from bridge.transports.http.upstream_errors import cause


async def websocket(proxy: OwnCalls, route: HttpRoute, request: web.Request) -> web.StreamResponse:
    """JSON-RPC text frames, rewritten exactly as on stdio; close codes mirrored. The upgrade
    carries the same end-to-end headers upstream as an HTTP request does."""
    host = web.WebSocketResponse(protocols=_subprotocols(request), max_msg_size=64 * 1024 * 1024,
                                 autoping=True)
    await host.prepare(request)
    url = route.upstream_url(request)
    extra = proxy.upstream_headers(route, request, websocket=True)
    user_agent = next((extra.pop(k) for k in list(extra) if k.lower() == "user-agent"), None)
    try:
        peer = await websockets.connect(url, subprotocols=_subprotocols(request) or None,
                                        additional_headers=extra, user_agent_header=user_agent,
                                        max_size=64 * 1024 * 1024, open_timeout=10)
    except (OSError, websockets.WebSocketException, asyncio.TimeoutError) as exc:
        reason = f"upstream {redact(url)}: {route.shown(cause(exc))}"
        route.recorder.log("upstream_error", why=reason)
        await host.close(code=1011, message=reason.encode()[:120])
        return host
    flow = route.new_flow()
    outgoing: asyncio.Queue[Write | None] = asyncio.Queue()

    def write(command: Write) -> None:
        outgoing.put_nowait(command)

    session = route.open_session(flow)
    session.driver = FlowDriver(flow, write, write)  # the proxy's own calls go to the agent like any frame
    route.live.add(session)

    async def sender() -> None:
        while (command := await outgoing.get()) is not None:
            if command.to == PEER:
                await peer.send(command.data.decode())
            else:
                await host.send_str(command.data.decode())
                written(session, [command])

    async def host_to_peer() -> None:
        async for msg in host:
            if msg.type == aiohttp.WSMsgType.TEXT:
                session.driver.perform(through(flow, msg.data.encode(), HOST))
            elif msg.type == aiohttp.WSMsgType.BINARY:
                await peer.send(msg.data)
        await outgoing.join()
        await peer.close(code=host.close_code or 1000, reason="")

    async def peer_to_host() -> None:
        try:
            async for message in peer:
                if isinstance(message, str):
                    session.driver.perform(through(flow, message.encode(), PEER))
                else:
                    await host.send_bytes(message)
        except websockets.ConnectionClosed:
            pass
        code = peer.close_code or 1000
        await host.close(code=code, message=(peer.close_reason or "").encode())

    writer = asyncio.create_task(_drain(sender, outgoing))
    tasks = [asyncio.create_task(host_to_peer()), asyncio.create_task(peer_to_host())]
    try:
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await peer.close()
    finally:
        outgoing.put_nowait(None)
        writer.cancel()
        route.live.discard(session)
        session.close("the WebSocket closed")
    return host


async def _drain(sender: Any, queue: asyncio.Queue[Any]) -> None:
    """Run ``sender`` over ``queue``, marking each item done so `queue.join()` means "all written"."""
    original_get = queue.get

    async def get() -> Any:
        item = await original_get()
        queue.task_done()
        return item

    queue.get = get  # type: ignore[method-assign]
    try:
        await sender()
    except (ConnectionError, websockets.ConnectionClosed, RuntimeError):
        pass


def _subprotocols(request: web.Request) -> list[str]:
    value = request.headers.get("Sec-WebSocket-Protocol", "")
    return [p.strip() for p in value.split(",") if p.strip()]
