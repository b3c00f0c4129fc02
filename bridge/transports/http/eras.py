"""`serve` in front of a 2025-11-25-only MCP server for 2026-07-28 hosts (issue 21, point 2): the
HTTP glue around the era bridge's core (`bridge.pipeline.eras.LegacyServer`), which decides every
frame; this file only carries them.

A route holds one upstream session per distinct client capability set, client info,
`Authorization` and identity (`Legacy`): the first request with them opens it (its `initialize`
and `notifications/initialized` POSTs, the `Mcp-Session-Id` the answer gave, then the GET stream),
and later ones reuse it. Each host request goes through its own flow, as any 2026-07-28 request
does, of the session's scope; its ids are the session's own while upstream
(`bridge.pipeline.era_exchanges`), so what comes back, on any of the session's streams, reaches the
exchange it belongs to: an answer (an `input_required` one ends the exchange; the retry's answer,
and whatever else the first request's stream brings once the host retried, goes to the retry's
exchange: `LegacyServer.answering`), a listen stream's notification (the listen stays open until
the host leaves, then its resources are unsubscribed), a request of the server's. A host that
leaves before its answer cancels that request alone (`LegacyServer.ended`: the 2025-11-25 server is
told). What belongs to no exchange goes through the session's keeper flow (an ambient reminder, or
one on the stream of a request no exchange waits on any more: answered `input_required` before the
host's retry, or left: onto a listen stream that opted in, else held for the next tool result). A
host that takes SSE gets each message of its exchange as it comes; one that does not, the answer
alone.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.jsonrpc import dumps, error_response, loads
from bridge.pipeline.commands import HOST, PEER, Send, Write, receipts_of
from bridge.pipeline.era_exchanges import Exchanges
from bridge.pipeline.eras import GET_STREAM, LegacyServer, session_key
from bridge.state.scope import Scope
from bridge.transports.driver import Timer, era_commands
from bridge.transports.guard import Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.listening import Listener
from bridge.transports.http.own_calls import OwnCalls, settled, written
from bridge.transports.http.routes import SESSION_HEADER, HttpRoute
from bridge.transports.http.upstream_errors import UPSTREAM_ERROR, cause, upstream_error
from bridge.transports.sessions import Session
from bridge.transports.sse import EventTooLarge, events, message_event

#: What a 2026-07-28 request carries in headers that a 2025-11-25 server must never see, and what
#: the proxy sets itself on each upstream request.
_DROPPED = frozenset({"mcp-protocol-version", "mcp-method", "mcp-name", SESSION_HEADER, "last-event-id", "accept",
                      "content-type"})
_UPSTREAM_FAILED = (aiohttp.ClientError, asyncio.TimeoutError, TooLarge, EventTooLarge)
#: The revisions with a session (`initialize`): a host that names one is no 2026-07-28 host.
_SESSION_ERAS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", LEGACY_ERA})
#: The HTTP status 2026-07-28 gives an answer that is one of these errors alone (method not found;
#: header mismatch, missing client capability, unsupported version); any other answer is 200.
_STATUS = {-32601: 404, -32020: 400, -32021: 400, -32022: 400}


@dataclass(eq=False)
class Legacy:
    """One upstream 2025-11-25 session, the bridge that speaks for its hosts, and their exchanges."""

    bridge: LegacyServer
    #: whose state what the session brings belongs to: the identity the rules name, else the
    #: session's own (its hosts share its ambient reminders, as a 2025-11-25 session's host would)
    scope: Scope
    proxy: OwnCalls
    route: HttpRoute
    #: the first request's headers, for what no host request carries (the GET stream, a listen's end)
    headers: dict[str, str]
    session_id: str | None = None
    stream: asyncio.Task[Any] | None = None
    #: the GET stream was answered (or is over): what the server sends on its own reaches the proxy
    streaming: asyncio.Event = field(default_factory=asyncio.Event)
    ids: Exchanges = field(default_factory=Exchanges)
    #: the host exchanges not over, and how many exchanges still carry (POST answers being read)
    open: set[_Exchange] = field(default_factory=set)
    carrying: int = 0
    #: the pipeline of what the server sends that is no exchange's (an ambient reminder to hold)
    keeper: Session | None = None
    #: host requests using it now, and when the last one ended (the loop's clock): idle expiry
    busy: int = 0
    used: float = 0.0
    #: the bridge's timer (what waits on a host's retry past `input_wait_s` is given up)
    timer: Timer | None = None


def takes(route: HttpRoute, request: web.Request) -> bool:
    """A JSON-RPC POST of a 2026-07-28 host on a route whose server speaks only 2025-11-25: one that
    names 2026-07-28, or, on a route whose hosts are 2026-07-28 (`host_era`), any revision without a
    session (the bridge, speaking 2026-07-28 for the server, refuses it as such a server would)."""
    version = request.headers.get("mcp-protocol-version")
    return (route.protocol == "mcp" and route.settings.bridged_server_era == LEGACY_ERA and request.method == "POST"
            and (version == MODERN_ERA or (route.settings.host_era == MODERN_ERA and version is not None
                                           and version not in _SESSION_ERAS)))


async def bridged(proxy: OwnCalls, route: HttpRoute, request: web.Request, body: bytes,
                  holding: Holding) -> web.StreamResponse:
    """The host's request through its flow, then the bridge, upstream; what comes back the same way,
    until its answer (a listen: until the host leaves)."""
    try:
        msg = loads(body)
    except ValueError:
        msg = None  # the flow answers it as any route does
    refused = LegacyServer.refuses(msg, request.headers.get("mcp-protocol-version"))
    if refused is not None:  # (before any session: as a 2026-07-28 server refuses it unread)
        return web.Response(status=400, body=dumps(refused), content_type="application/json", charset="utf-8")
    route.rpc_path = route.below(request.path)
    headers = {k: v for k, v in proxy.upstream_headers(route, request).items() if k.lower() not in _DROPPED}
    legacy = _legacy(proxy, route, request, msg, headers)
    if legacy is None:
        why = (f"reminder-bridge route {route.name!r}: {route.limits.max_sessions} upstream {LEGACY_ERA} sessions "
               "are open (max_sessions) and none is idle; try again later")
        error = error_response(msg.get("id") if isinstance(msg, dict) else None, UPSTREAM_ERROR, why)
        return web.Response(status=503, headers={"Retry-After": "1"}, body=dumps(error),
                            content_type="application/json", charset="utf-8")
    session = route.sessionless(legacy.scope, keeper=_keeper(legacy))
    exchange = _Exchange(session, headers, _Answer(request, session))
    session.driver = proxy.driver_for(route, session, upstream=lambda command: _own(legacy, exchange, command))
    legacy.busy += 1
    legacy.open.add(exchange)
    try:
        try:
            toward = [c for c in await session.driver.settle(await settled(session, body, HOST, request.headers))
                      if isinstance(c, Write)]
            exchange.listen = session.flow.subscription()
            for command in toward:
                if command.to == HOST:
                    await exchange.answer.send(command)
            frames = [legacy.ids.toward(exchange, c.data) for c in toward if c.to == PEER]
            proxy.spawn(_run(legacy, exchange, [f for f in frames if f is not None]))  # it goes on should the host leave: the session stays whole
            await exchange.over.wait()
        finally:
            exchange.over.set()  # (the host may have left): what comes for it now is no one's
            legacy.busy -= 1
            legacy.used = asyncio.get_running_loop().time()
            legacy.open.discard(exchange)
            route.learn(session.flow)
            if exchange.listed is not None and exchange.answer.stream is not None:
                route.listening.close(exchange.listed, exchange.answer.stream)
            ended = [w for own in legacy.ids.end(exchange) for w in legacy.bridge.ended(own)]
            if ended and legacy in (route.eras or {}).values():  # (a session ending, its DELETE ends all)
                proxy.spawn(_carry(legacy, ended, None))  # the host left: its listen's resources, its request, end
        return await exchange.answer.done()
    finally:  # once its answer is written: what the answer carried (an outbox row) is reported to a live flow
        session.close("a 2026-07-28 request is over once answered")


def _own(legacy: Legacy, exchange: _Exchange | None, command: Write) -> None:
    """What an exchange's flow (None: the session's keeper) sends upstream on its own, at its timers
    (an outbox poll), through the bridge as its request's frames go: never straight to the 2025-11-25
    server, in the host's era; the answer comes back to the flow that asked."""
    frame = legacy.ids.toward(exchange, command.data)
    if frame is not None:
        legacy.proxy.spawn(_carry(legacy, legacy.bridge.toward_server(frame), exchange))


def _legacy(proxy: OwnCalls, route: HttpRoute, request: web.Request, msg: Any,
            headers: dict[str, str]) -> Legacy | None:
    """The upstream session of this request's capability set, client info, credentials and identity;
    None when `max_sessions` are open and none is idle (hosts choose what they send: each new set
    would otherwise open one more upstream session, without bound)."""
    identity = route.sessionless_scope(request)
    seen = json.dumps([session_key(msg), request.headers.get("Authorization"),
                       identity.id if identity.lasting else None])
    key = hashlib.sha256(seen.encode()).hexdigest()
    if route.eras is None:
        route.eras = {}
    if key not in route.eras:
        if len(route.eras) >= route.limits.max_sessions and not _evicted(proxy, route):
            return None
        scope = identity if identity.lasting else Scope.identity(route.name, "era-session", key)
        bridge = LegacyServer(route.settings.host_era, lambda: MODERN_ERA, route.recorder, streams=True,
                              input_wait_s=route.settings.input_wait_s)
        legacy = route.eras[key] = Legacy(bridge, scope, proxy, route, headers)
        legacy.timer = Timer(bridge.clock, lambda now: proxy.spawn(_carry(legacy, bridge.wake(now), None)))
    return route.eras[key]


class _Answer:
    """What the host gets: each message as an SSE event as soon as the flow gives it, when the host
    takes SSE; else the answer alone, as JSON, once the exchange is over. An answer with nothing
    before it goes as JSON either way, so that its HTTP status can say what its error is (`_STATUS`)."""

    def __init__(self, request: web.Request, session: Any):
        self.request = request
        self.session = session
        self.stream: web.StreamResponse | None = None
        self.last: Write | None = None
        self.held: Write | None = None  # an answer that may yet go alone
        self.streams = "text/event-stream" in request.headers.get("Accept", "")

    async def send(self, message: Write) -> None:
        answer = _is_answer(message.data)
        if self.last is None or answer:  # a JSON body carries the answer, not what follows it
            self.last = message
        if not self.streams:
            return
        try:
            if self.stream is None:
                if answer and self.held is None:
                    self.held = message
                    return
                self.stream = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                                          "Cache-Control": "no-cache"})
                await self.stream.prepare(self.request)
                if self.held is not None:
                    await self._event(self.held)
            await self._event(message)
        except ConnectionResetError:  # the host went away: what it carried was not delivered
            self.session.flow.unwritten(receipts_of([message]))

    async def _event(self, message: Write) -> None:
        assert self.stream is not None
        await self.stream.write(message_event(message.data))
        written(self.session, [message])

    async def done(self) -> web.StreamResponse:
        if self.stream is not None:
            await self.stream.write_eof()
            return self.stream
        if self.last is None:
            return web.Response(status=202)
        written(self.session, [self.last])
        return web.Response(status=_status(self.last.data), body=self.last.data, content_type="application/json",
                            charset="utf-8")


def _status(data: bytes) -> int:
    try:
        msg = loads(data)
    except ValueError:
        return 200
    error = msg.get("error") if isinstance(msg, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return _STATUS.get(code, 200) if isinstance(code, int) else 200


def _is_answer(data: bytes) -> bool:
    try:
        msg = loads(data)
    except ValueError:
        return False
    return isinstance(msg, dict) and "method" not in msg


@dataclass(eq=False)
class _Exchange:
    """One host request's way through the bridge and back."""

    session: Session
    headers: dict[str, str]
    answer: _Answer
    #: its answer went to the host, or nothing upstream can answer it any more
    over: asyncio.Event = field(default_factory=asyncio.Event)
    #: its frames went upstream (an SSE answer may still be read, counted in `Legacy.carrying`)
    carried: bool = False
    #: a `subscriptions/listen`: the flow's key for it, its open stream (once acknowledged), and the
    #: name the route keeps that under (for the flows of its scope: an outbox's reminder)
    listen: Any = None
    listener: Listener | None = None
    listed: str | None = None


async def _run(legacy: Legacy, exchange: _Exchange, frames: list[bytes]) -> None:
    """An exchange's frames through the bridge and upstream (the first request opens the session;
    the bridge holds the others' until it is open), then what nothing can answer any more is ended."""
    legacy.carrying += 1
    try:
        if frames:
            await _carry(legacy, legacy.bridge.toward_server(b"\n".join(frames)), exchange)
    finally:
        exchange.carried = True
        await _carried(legacy)


async def _carried(legacy: Legacy) -> None:
    """One carry is over (an exchange's frames sent, or an answer stream read to its end)."""
    legacy.carrying -= 1
    _listen(legacy)
    await _settle(legacy)


async def _settle(legacy: Legacy) -> None:
    """Exchanges whose frames are carried are over once they owe nothing; once no exchange carries
    any more, what is still owed gets an error (no answer can come): nothing hangs. A listen stays."""
    for exchange in list(legacy.open):
        if not exchange.carried or exchange.over.is_set() or exchange.listen is not None:
            continue
        owed = legacy.ids.owed(exchange)
        if not owed:
            exchange.over.set()
        elif legacy.carrying == 0:
            why = f"the {LEGACY_ERA} server's answer streams ended without an answer to this request"
            await _carry(legacy, [w for own in owed for w in legacy.bridge.from_server(
                dumps(error_response(own, -32603, why)))], exchange)
            exchange.over.set()


async def _carry(legacy: Legacy, writes: list[Write], origin: _Exchange | None) -> None:
    """Perform the bridge's writes in order: POST what goes to the server (each message of its
    answer back through the bridge as it comes), and give what goes to the host to the exchange it
    belongs to (else to ``origin``'s, while it is not over, else the session's keeper)."""
    assert legacy.timer is not None
    for write in era_commands(legacy.bridge, writes, legacy.timer):
        if write.to == PEER:
            posted = legacy.ids.posted(write.data)
            await _send(legacy, write.data, posted.exchange or origin, posted.request_id)
            continue
        back = legacy.ids.back(write.data)
        target = back.exchange
        if target is None and origin is not None and not origin.over.is_set():
            target = origin
        await _to_host(legacy, target, back.data, back.answer)


async def _send(legacy: Legacy, data: bytes, owner: _Exchange | None, request_id: Any) -> None:
    """One message POSTed upstream, once the server has taken it (so what follows reaches it after):
    its answer's messages through the bridge, as from that request; an SSE answer is read on its
    own, so a long call holds up neither what follows it nor another host's requests."""
    try:
        response = await _post(legacy, data, owner.headers if owner is not None else legacy.headers)
    except _UPSTREAM_FAILED as exc:
        await _failed(legacy, exc, owner, request_id)
        return
    if "text/event-stream" not in response.headers.get("content-type", ""):
        await _read(legacy, response, owner, request_id)
        return
    legacy.carrying += 1
    legacy.proxy.spawn(_read(legacy, response, owner, request_id, spawned=True))


async def _read(legacy: Legacy, response: aiohttp.ClientResponse, owner: _Exchange | None, request_id: Any,
                spawned: bool = False) -> None:
    proxy = legacy.proxy
    came_on = request_id if request_id is not None else GET_STREAM
    try:
        async with response:
            if "text/event-stream" in response.headers.get("content-type", ""):
                async for event in events(response.content.iter_any(), proxy.limits.max_event_bytes):
                    if event.data is not None:  # (after an input_required answer: its retry's exchange's)
                        now = legacy.ids.of(legacy.bridge.answering(request_id)) or owner
                        await _carry(legacy, legacy.bridge.from_server(event.data, came_on), now)
            elif "json" in response.headers.get("content-type", ""):
                data = await read_answer(response, Holding(proxy.guard.budget), proxy.limits, release=True)
                if data.strip():
                    await _carry(legacy, legacy.bridge.from_server(data, came_on), owner)
    except _UPSTREAM_FAILED as exc:
        await _failed(legacy, exc, owner, request_id)
    finally:
        if spawned:
            await _carried(legacy)


async def _failed(legacy: Legacy, exc: BaseException, owner: _Exchange | None, request_id: Any) -> None:
    """The upstream failed a request: its error, through the bridge, to whoever asked."""
    route = legacy.route
    route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="a bridged 2025-11-25 request")
    if request_id is not None:
        await _carry(legacy, legacy.bridge.from_server(dumps(upstream_error(route, request_id, exc))), owner)


async def _to_host(legacy: Legacy, target: _Exchange | None, data: bytes, answer: bool) -> None:
    """A message the server's way through the flow of the exchange it is for (none: the keeper's,
    which puts an ambient reminder on a listen stream of its scope, or holds it for the fallback)."""
    session = target.session if target is not None else _keeper(legacy)
    route = legacy.route
    for command in await session.driver.settle(await settled(session, data, PEER)):
        if not isinstance(command, Write):
            continue
        if command.to == PEER:  # the flow's own follow-up
            frame = legacy.ids.toward(target, command.data)
            if frame is not None:
                await _carry(legacy, legacy.bridge.toward_server(frame), target)
            continue
        for left in legacy.proxy.to_listen(route, session, [command]):
            if target is None:
                route.recorder.warning("era_unrouted", why=f"a {LEGACY_ERA} server's message belongs to no "
                                       f"{MODERN_ERA} request or listen stream that is still open")
                continue
            if target.listener is not None:  # as the route's listen streams are written: a slow host holds up nothing
                legacy.proxy.on_listener(route, session, target.listener,
                                         left if isinstance(left, Send) else Send(HOST, left.data))
                continue
            if target.listen is not None and not legacy.streaming.is_set():
                await _streaming(legacy)  # acknowledged once what the server sends on its own reaches the proxy
            await target.answer.send(left)
            if target.listen is not None and target.listener is None and target.answer.stream is not None:
                target.listener = Listener(target.answer.stream)
                target.listed = route.listening.open(session.flow.scope, target.listen, target.answer.stream)
    if answer and target is not None:
        target.over.set()


def _keeper(legacy: Legacy) -> Session:
    """The session's keeper: it goes on with what each host request's flow settled (the era, the
    host's dialect: `Session.kept`), so that it reads the server's messages as its hosts' flows do,
    and owns the outbox polls of its scope, carried through the bridge."""
    if legacy.keeper is None:
        legacy.keeper = legacy.route.keeper_session(legacy.scope, upstream=lambda command: _own(legacy, None, command))
    return legacy.keeper


async def _post(legacy: Legacy, message: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
    """One POST to the 2025-11-25 server in the session's name, up to its answer's headers."""
    proxy, route = legacy.proxy, legacy.route
    sent = {**headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if legacy.session_id is not None:
        sent[SESSION_HEADER] = legacy.session_id
    if legacy.bridge.state.opened is not None:
        sent["MCP-Protocol-Version"] = LEGACY_ERA
    async with asyncio.timeout(proxy.upstream_timeout):
        response = await proxy.upstream("POST", route.target.url(route.rpc_path, ""), data=message, headers=sent,
                                        allow_redirects=True)
    if legacy.session_id is None and response.headers.get(SESSION_HEADER):
        legacy.session_id = response.headers[SESSION_HEADER]
    return response


def _listen(legacy: Legacy) -> None:
    """Once the session is open: its GET stream, kept open for the session's life."""
    if legacy.stream is None and legacy.session_id is not None and legacy.bridge.state.opened is not None:
        legacy.stream = asyncio.get_running_loop().create_task(_stream(legacy))


async def _streaming(legacy: Legacy) -> None:
    """Until the GET stream is answered (a listen acknowledged before it might miss what follows),
    at most the upstream timeout."""
    _listen(legacy)
    if legacy.stream is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(legacy.proxy.upstream_timeout):
                await legacy.streaming.wait()


async def _stream(legacy: Legacy) -> None:
    """The session's GET stream: what comes on it is no request's (a listen stream's notifications,
    an ambient reminder, a request of the server's), through the bridge as such."""
    proxy, route = legacy.proxy, legacy.route
    sent = {**legacy.headers, "Accept": "text/event-stream", "MCP-Protocol-Version": LEGACY_ERA,
            SESSION_HEADER: legacy.session_id or ""}
    try:
        async with await proxy.upstream("GET", route.target.url(route.rpc_path, ""), headers=sent,
                                        allow_redirects=True) as response:
            legacy.streaming.set()
            if "text/event-stream" not in response.headers.get("content-type", ""):
                return
            async for event in events(response.content.iter_any(), proxy.limits.max_event_bytes):
                if event.data is not None:
                    await _carry(legacy, legacy.bridge.from_server(event.data, GET_STREAM), None)
    except _UPSTREAM_FAILED as exc:
        route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="a bridged session's GET stream")
    finally:
        legacy.streaming.set()


def _evicted(proxy: OwnCalls, route: HttpRoute) -> bool:
    """Room for one more upstream session: the one idle longest ends (as a full `SessionTable`
    evicts); False when every one is in use."""
    idle = [(legacy.used, key) for key, legacy in route.eras.items() if legacy.busy == legacy.carrying == 0]
    if not idle:
        return False
    legacy = route.eras.pop(min(idle)[1])
    route.recorder.session_ended("evicted")
    proxy.spawn(_end(proxy, route, legacy))
    return True


async def expire(proxy: OwnCalls, route: HttpRoute, idle_s: float) -> None:
    """The upstream sessions no host has used for ``idle_s`` seconds end (`--session-idle`)."""
    now = asyncio.get_running_loop().time()
    for key, legacy in list((route.eras or {}).items()):
        if legacy.busy == legacy.carrying == 0 and now - legacy.used > idle_s:
            del route.eras[key]
            await _end(proxy, route, legacy)


async def close(proxy: OwnCalls, route: HttpRoute) -> None:
    """Shutdown: every upstream session the route opened ends."""
    ending, route.eras = list((route.eras or {}).values()), {}
    await asyncio.gather(*(_end(proxy, route, legacy) for legacy in ending))


async def _end(proxy: OwnCalls, route: HttpRoute, legacy: Legacy) -> None:
    """One upstream session ends: its hosts' open listen streams, its GET stream, then a DELETE
    (2025-11-25 sessions end so)."""
    for exchange in legacy.open:
        exchange.over.set()
    if legacy.timer is not None:
        legacy.timer.close()
    if legacy.stream is not None:
        legacy.stream.cancel()
    if legacy.keeper is not None:
        legacy.keeper.close("its upstream session ended")
    if legacy.session_id is None or proxy.client is None:
        return
    try:
        async with asyncio.timeout(5):
            await (await proxy.client.delete(route.target.url(route.rpc_path, ""), headers={
                SESSION_HEADER: legacy.session_id, "MCP-Protocol-Version": LEGACY_ERA})).release()
    except _UPSTREAM_FAILED as exc:
        route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="ending a bridged session")
