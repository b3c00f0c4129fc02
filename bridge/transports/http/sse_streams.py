"""An SSE answer relayed event by event, as the upstream sends it, never buffered: each event's
message through the session's flow, the endpoint event of the 2024-11-05 transport mapped to the
proxy, and a stream the upstream breaks ended cleanly with the host's request answered."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from bridge.pipeline.commands import Forward, Write
from bridge.transports.forwarding import redact
from bridge.transports.http.own_calls import OwnCalls, written
from bridge.transports.http.passthrough import Relayed, response_headers, start_relay
from bridge.transports.http.routes import HttpRoute
from bridge.transports.http.upstream_errors import cause, unanswered
from bridge.transports.sessions import Session
from bridge.transports.sse import Event, EventTooLarge, SseSplitter, message_event


async def relay_sse(proxy: OwnCalls, route: HttpRoute, request: web.Request, upstream: aiohttp.ClientResponse,
                    session: Session | None, body: bytes) -> web.StreamResponse:
    """Relay an SSE stream event by event, as the upstream sends them: never buffered.

    An upstream that goes away mid-stream, or sends an event over `max_event_bytes`, ends the
    stream cleanly; if the host's request has not been answered yet (the flow saw no response to
    it), a JSON-RPC error event answers it first (spec §8.3)."""
    response = Relayed(status=upstream.status, headers=response_headers(upstream))
    first = await start_relay(request, upstream, response)
    stream = OpenStream(response)
    listen: str | None = None  # the name it is kept under while open, when it is a listen stream
    if session is not None:
        await proxy.write_messages(session, response, session.take_waiting())
        if request.method == "GET":
            session.streams.insert(0, stream)  # the session's own stream is where pushes go first
        else:
            session.streams.append(stream)
        subscription = session.flow.subscription()
        if subscription is not None:  # 2026-07-28 `subscriptions/listen`: other requests' flows may write here
            listen = route.listening.open(session.flow.scope, subscription, response)
    failure: BaseException | None = None
    splitter = SseSplitter(proxy.limits.max_event_bytes)
    try:
        if first:
            await _sse_events(proxy, route, request, splitter.feed(first), session, response)
        async for chunk in upstream.content.iter_any():
            await _sse_events(proxy, route, request, splitter.feed(chunk), session, response)
        await _sse_events(proxy, route, request, splitter.close(), session, response)
    except EventTooLarge as exc:
        failure = exc
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, asyncio.TimeoutError) as exc:
        if request.transport is None or request.transport.is_closing():
            raise  # the host is gone too: nothing to tell
        failure = exc
    finally:
        stream.task_done = True
        if session is not None and stream in session.streams:
            session.streams.remove(stream)
        if listen is not None:
            route.listening.close(listen, response)
    if failure is not None:
        route.recorder.log("upstream_error", why=route.shown(cause(failure)), url=redact(str(upstream.url)),
                           during="stream")
        answers = unanswered(route, session, body, failure)
        if answers:
            await response.write(b"".join(message_event(answer) for answer in answers))
        elif isinstance(failure, EventTooLarge):
            await response.write(f": reminder-bridge: stream ended: {failure}\n\n".encode())
    await response.write_eof()
    return response


async def _sse_events(proxy: OwnCalls, route: HttpRoute, request: web.Request, batch: list[Event],
                      session: Session | None, response: web.StreamResponse) -> None:
    """The events of one upstream read, each through the pipeline, to the host in one write: none
    waits for a later read, and a burst costs one write, not one per event."""
    out: list[bytes] = []
    delivered: list[Write] = []  # what the flow rewrote into them, reported once written
    for event in batch:
        data = await _sse_event(proxy, route, request, event, session, delivered)
        if data:
            out.append(data)
    if out:
        await response.write(out[0] if len(out) == 1 else b"".join(out))
        if session is not None and delivered:
            written(session, delivered)


async def _sse_event(proxy: OwnCalls, route: HttpRoute, request: web.Request, event: Event, session: Session | None,
                     delivered: list[Write]) -> bytes:
    """One upstream event as the host gets it; the flow's commands for it join ``delivered``."""
    if event.data is None:
        return event.raw  # keep-alive comments and retry hints pass as they are
    if (b"event", b"endpoint") in event.fields:  # 2024-11-05 HTTP+SSE: where to POST, at the proxy
        url = event.data.decode(errors="replace")
        if session is not None:
            route.sessions.put("q:" + urlsplit(url).query, session)
        mapped = route.to_proxy(url, request)
        return event.raw if mapped == url else event.with_data(mapped.encode())
    if session is None:
        return event.raw
    host = await proxy.through_peer(route, request, session, event.data)
    if len(host) == 1 and type(host[0]) is Forward:
        return event.raw
    delivered += host
    return b"".join(event.with_data(c.data, keep_id=i == len(host) - 1) for i, c in enumerate(host))


@dataclass(eq=False)
class OpenStream:
    """An SSE answer open to a session's host, which pushes may use until it ends."""

    response: web.StreamResponse
    task_done: bool = False
