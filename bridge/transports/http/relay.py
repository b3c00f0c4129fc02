"""One host request upstream and its answer back: a JSON-RPC POST through its session's flow
(the proxy's own calls first, then the request, or the proxy's own answer), any other request as
it came. Which relay an answer takes (SSE, a JSON stream, one JSON body, raw bytes) is decided here."""
from __future__ import annotations

import asyncio
import math

import aiohttp
from aiohttp import web

from bridge.pipeline.commands import HOST, PEER, Call, Forward, Reply, Send, Write, receipts_of
from bridge.transports.forwarding import redact
from bridge.transports.guard import Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.json_streams import json_answer, relay_json_stream
from bridge.transports.http.own_calls import OwnCalls, settled, written
from bridge.transports.http.passthrough import response_headers, stream_raw
from bridge.transports.http.routes import HttpRoute
from bridge.transports.http.sse_streams import relay_sse
from bridge.transports.http.upstream_errors import cause, unanswered
from bridge.transports.sessions import Session
from bridge.transports.sse import message_event


async def jsonrpc(proxy: OwnCalls, route: HttpRoute, request: web.Request, body: bytes,
                  holding: Holding) -> web.StreamResponse:
    """The host's JSON-RPC request through its session's flow: the proxy's own calls go first
    (spec §5: inject, then forward), then the request itself, or the proxy's own answer."""
    route.rpc_path = route.below(request.path)
    session, kept = await route.session_for(request)
    headers = session.headers = proxy.upstream_headers(route, request)  # the proxy's own requests reuse them
    commands = await settled(session, body, HOST, request.headers)
    if len(commands) == 1 and type(commands[0]) is Forward:
        return await relay(proxy, route, request, body, session, kept=kept, holding=holding,
                           headers=headers)  # the common case
    commands = await session.driver.settle(commands)
    main: Forward | Send | None = None  # the request itself, as it goes upstream
    calls: list[Call] = []
    host: list[Write] = []
    for command in commands:
        if isinstance(command, Call):
            calls.append(command)
        elif isinstance(command, (Forward, Send)) and command.to == PEER and main is None:
            main = command
        elif isinstance(command, Write) and command.to == HOST:
            host.append(command)
    if calls:
        host += proxy.to_listen(route, session, await proxy.calls(route, session, calls, request))
    if main is not None:
        return await relay(proxy, route, request, main.data, session, kept=kept, holding=holding, headers=headers,
                           rewritten=main if type(main) is Send else None,
                           trace=session.flow.trace_context())
    route.learn(session.flow)
    try:
        return await _reply(host, request, session)
    finally:
        if session.provisional and session.id is not None:  # an id no upstream confirmed takes no room
            route.sessions.forget(session.id, session)  # (made-up ids cannot evict)
        if not kept or session.provisional:
            session.close("the request was answered by the proxy; nothing of it outlives the request")


async def relay(proxy: OwnCalls, route: HttpRoute, request: web.Request, body: bytes, session: Session | None, *,
                kept: bool = True, holding: Holding, headers: dict[str, str] | None = None,
                rewritten: Send | None = None, trace: dict[str, str] | None = None) -> web.StreamResponse:
    """``request`` upstream with its own end-to-end headers (``headers``: those already made for
    it), never another request's: a GET's `Last-Event-ID` and `Accept` are the GET's, whatever the
    session's last POST carried."""
    if headers is None:
        headers = proxy.upstream_headers(route, request)
    if rewritten is not None or trace:
        headers = dict(headers)  # the session's copy stays as the host sent it
        if rewritten is not None:
            mirror_mcp_headers(headers, rewritten)
        if trace:  # the proxy's span is the parent of what the upstream does with a rewritten request
            for name in [k for k in headers if k.lower() in trace]:
                del headers[name]
            headers.update(trace)
    url = route.upstream_url(request)
    try:
        async with asyncio.timeout(proxy.upstream_timeout):  # no extra task per request, as wait_for makes
            upstream = await proxy.upstream(request.method, url, data=body if body else None, headers=headers)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        route.recorder.log("upstream_error", why=route.shown(cause(exc)), url=redact(url))
        if session is not None and (not kept or session.provisional):
            if session.id is not None:
                route.sessions.forget(session.id, session)
            session.close("the upstream could not be reached")
        answers = unanswered(route, session, body, exc)
        if len(answers) == 1:  # one request: its error is the answer (a batch gets the HTTP error)
            return web.Response(body=answers[0], content_type="application/json", charset="utf-8")
        return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: upstream "
                                             f"{redact(url)}: {route.shown(cause(exc))}\n")
    adopted = kept
    async with upstream:
        if session is not None:
            adopted = route.confirm(session, upstream) if kept else route.adopt(session, request, upstream)
            route.live.add(session)
        ctype = upstream.headers.get("content-type", "")
        try:
            if "text/event-stream" in ctype:
                return await relay_sse(proxy, route, request, upstream, session, body)
            if session is not None and "json" in ctype and upstream.headers.get("content-length") is None:
                return await relay_json_stream(proxy, route, request, upstream, session, body)
            if session is not None and "json" in ctype:
                try:
                    data = await read_answer(upstream, holding, proxy.limits)
                except (aiohttp.ClientError, asyncio.TimeoutError, TooLarge) as exc:  # died, or too big
                    route.recorder.log("upstream_error", why=route.shown(cause(exc)), url=redact(url))
                    busy = isinstance(exc, TooLarge) and exc.status == 503  # the memory budget, not the upstream
                    retry = {"Retry-After": "1"} if busy else None
                    answers = unanswered(route, session, body, exc)
                    if len(answers) != 1:
                        return web.Response(status=503 if busy else 502, headers=retry,
                                            text=f"reminder-bridge: route {route.name!r}: upstream "
                                                 f"{redact(url)}: {route.shown(cause(exc))}\n")
                    return web.Response(body=answers[0], content_type="application/json", charset="utf-8",
                                        status=503 if busy else 200, headers=retry)
                answer, extras = await json_answer(proxy, route, request, session, data)
                return await _answer(session, request, upstream.status, answer, response_headers(upstream),
                                     extras)
            return await stream_raw(request, upstream)
        finally:
            route.live.discard(session)
            if session is not None:
                session.flow.exchange_ended(body)
                route.learn(session.flow)
                route.remember(session)
                if not adopted:
                    session.close("the request ended before the held reminders could be delivered "
                                  "(no session to deliver them to later)")


async def _answer(session: Session | None, request: web.Request, status: int, answer: Write,
                  headers: dict[str, str], extras: list[Write] | None = None) -> web.StreamResponse:
    """One JSON answer to the host. Messages its session holds, and what the flow added before the
    answer, go first, as SSE when the host takes it (a JSON body carries one message).  An answer
    that delivers something (an outbox event) is written here, so it can be reported written."""
    data = answer.data
    waiting = session.take_waiting() if session is not None and session.waiting else []
    before = waiting + (extras or [])
    sent = [answer]
    if before and "text/event-stream" in request.headers.get("Accept", ""):
        headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-length")}
        headers["Content-Type"] = "text/event-stream"
        data = b"".join(message_event(c.data) for c in before) + (message_event(data) if data.strip() else b"")
        sent += before
    elif before and session is not None:
        session.hold(waiting)  # the session's own wait for a stream
        session.flow.unwritten(receipts_of(extras or []))
    response = web.Response(status=status, body=data, headers=headers)
    if session is not None and receipts_of(sent):
        await response.prepare(request)
        await response.write_eof()
        written(session, sent)
    return response


async def _reply(host: list[Write], request: web.Request, session: Session | None) -> web.StreamResponse:
    """The proxy answers the host itself (an invalid reminder, a queued inject, a refusal)."""
    reply = next((c for c in reversed(host) if isinstance(c, Reply)), None)
    if reply is None and not host:
        return web.Response(status=202)
    answer = reply if reply is not None else host[-1]
    extras = [c for c in host if c is not answer]
    headers = {"Content-Type": "application/json"}
    if reply is not None and reply.retry_after_ms is not None:
        headers["Retry-After"] = str(max(1, math.ceil(reply.retry_after_ms / 1000)))
    return await _answer(session, request, 200, answer, headers, extras)


def mirror_mcp_headers(headers: dict[str, str], sent: Send) -> None:
    """MCP 2026-07-28 mirrors the method (and tool/resource name) in headers: keep them true to
    the message the flow rewrote (it says which)."""
    names = {k.lower(): k for k in headers}
    if "mcp-method" in names and sent.method is not None:
        headers[names["mcp-method"]] = sent.method
        if "mcp-name" in names and sent.name is not None:
            headers[names["mcp-name"]] = sent.name
