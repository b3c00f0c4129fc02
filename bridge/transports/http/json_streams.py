"""A JSON answer the upstream streams with no Content-Length (newline-delimited messages on a
stream that stays open): each whole line through the flow and on to the host at once. Also which
of the flow's commands for a JSON answer is the answer itself (the one that says it `answers`)."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from bridge.pipeline.commands import HOST, Forward, Reply, Send, Write
from bridge.transports.forwarding import redact
from bridge.transports.http.bodies import TooLarge
from bridge.transports.http.own_calls import OwnCalls, written
from bridge.transports.http.passthrough import response_headers
from bridge.transports.http.routes import HttpRoute
from bridge.transports.http.upstream_errors import unanswered
from bridge.transports.sessions import Session


async def relay_json_stream(proxy: OwnCalls, route: HttpRoute, request: web.Request, upstream: aiohttp.ClientResponse,
                            session: Session, body: bytes) -> web.StreamResponse:
    """A JSON answer the upstream streams (no Content-Length), e.g. newline-delimited messages on a
    stream that stays open (a `subscriptions/listen` answered as JSON lines): each line that is a
    whole message goes through the pipeline and on to the host at once, never held until the upstream
    closes. A body that is not one message a line (pretty-printed JSON) is read to its end as before,
    within `max_response_bytes`."""
    limit = proxy.limits.max_response_bytes
    response = web.StreamResponse(status=upstream.status, headers=response_headers(upstream))
    await response.prepare(request)
    try:
        async for line, ends in json_lines(upstream, limit):
            answer, extras = await json_answer(proxy, route, request, session, line)
            for extra in extras:
                await response.write(extra.data + b"\n")
            data = answer.data
            await response.write(data if data is line or not ends else data + b"\n")
            written(session, [*extras, answer])
    except TooLarge as exc:
        route.recorder.log("upstream_error", why=f"a streamed JSON answer over max_response_bytes = {limit}",
                           url=redact(str(upstream.url)))
        for error in unanswered(route, session, body, exc):
            await response.write(error)
    await response.write_eof()
    return response


async def json_lines(upstream: aiohttp.ClientResponse, limit: int) -> AsyncIterator[tuple[bytes, bool]]:
    """What a JSON answer the upstream streams (no Content-Length) holds, with whether it is a line:
    each line that is a whole JSON value (or blank) as soon as it is complete, with its newline; once
    a line alone is no JSON (pretty-printed JSON), the rest of the body in one piece at its end. More
    than ``limit`` bytes held at once raises `TooLarge`."""
    pending = bytearray()  # an unfinished line; once a line alone was no JSON, the rest of the body
    scanned = 0  # how much of `pending` holds no newline
    whole = False
    async for chunk in upstream.content.iter_any():
        pending += chunk
        if len(pending) > limit:
            raise TooLarge(f"the upstream's answer is over max_response_bytes = {limit}")
        while not whole and (end := pending.find(b"\n", scanned)) >= 0:
            line = bytes(pending[:end + 1])
            try:
                json.loads(line)
            except (ValueError, RecursionError):
                if line.strip():
                    whole = True
                    break
            del pending[:end + 1]
            scanned = 0
            yield line, True
        scanned = len(pending)
    if pending:
        yield bytes(pending), False


async def json_answer(proxy: OwnCalls, route: HttpRoute, request: web.Request, session: Session,
                      data: bytes) -> tuple[Write, list[Write]]:
    """A JSON answer through the flow: (the answer, what the flow adds before it), as the write
    commands the flow gave (what they deliver is reported once written). The answer is the command
    that answers a request (its `answers` key); a frame that answers none (a notification on a
    stream) is the last command the flow gave for it."""
    if not data.strip():
        return Forward(HOST, data), []
    host = await proxy.through_peer(route, request, session, data)
    if len(host) == 1:  # the common case: the answer alone
        return host[0], []
    answer = next((c for c in reversed(host) if isinstance(c, (Forward, Send, Reply)) and c.answers is not None),
                  host[-1] if host else None)
    extras = [c for c in host if c is not answer]
    if answer is None:  # the flow kept the answer back (nothing to relay): the extras are all there is
        return (extras[-1], extras[:-1]) if extras else (Forward(HOST, b""), [])
    return answer, extras
