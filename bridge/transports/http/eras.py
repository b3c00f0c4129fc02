"""`serve` in front of a 2025-11-25-only MCP server for 2026-07-28 hosts (issue 21, point 2): the
HTTP glue around the era bridge's core (`bridge.pipeline.eras.LegacyServer`), which decides every
frame; this file only carries them.

A route holds one upstream session per distinct client capability set, client info and
`Authorization` (`Legacy`): the first request with them opens it (its `initialize` and
`notifications/initialized` POSTs, the `Mcp-Session-Id` the answer gave, then the GET stream), and
later ones reuse it. Each host request goes through its own flow, as any 2026-07-28 request does;
its id is made unique in the shared upstream session and given back as the host wrote it. A host
that takes SSE gets each message of its exchange as it comes; one that does not, the answer alone.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.mcp import CLIENT_CAPS_KEY, CLIENT_INFO_KEY, PROTOCOL_KEY
from bridge.dialects.paths import params_meta
from bridge.jsonrpc import dumps, error_response, loads
from bridge.pipeline.commands import HOST, PEER, Write
from bridge.pipeline.eras import LegacyServer
from bridge.transports.guard import Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.own_calls import OwnCalls, settled, written
from bridge.transports.http.routes import SESSION_HEADER, HttpRoute
from bridge.transports.http.upstream_errors import cause, upstream_error
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


@dataclass
class Legacy:
    """One upstream 2025-11-25 session and the bridge that speaks for its hosts."""

    bridge: LegacyServer
    #: held while the session opens, so a second request waits for it rather than racing it
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)
    session_id: str | None = None
    stream: asyncio.Task[Any] | None = None
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    #: host requests using it now, and when the last one ended (the loop's clock): idle expiry
    busy: int = 0
    used: float = 0.0


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
    """The host's request through its flow, then the bridge, upstream; the answer back the same way."""
    refused = _refused(request, body)
    if refused is not None:
        return refused
    route.rpc_path = route.below(request.path)
    session, _ = await route.session_for(request)
    legacy = _legacy(route, request, body)
    headers = {k: v for k, v in proxy.upstream_headers(route, request).items() if k.lower() not in _DROPPED}
    exchange = _Exchange(proxy, route, session, legacy, headers, _Answer(request, session))
    legacy.busy += 1
    try:
        toward = [c for c in await session.driver.settle(await settled(session, body, HOST, request.headers))
                  if isinstance(c, Write)]
        for command in toward:
            if command.to == HOST:
                await exchange.answer.send(command)
        frames = [exchange.own_id(c.data) for c in toward if c.to == PEER]
        if frames:  # the first request opens the session; the others wait for it, then go as they come
            async with legacy.opening if legacy.bridge.state.opened is None else contextlib.nullcontext():
                await exchange.carry(legacy.bridge.toward_server(b"\n".join(frames)))
        _listen(proxy, route, legacy, headers)
    finally:
        legacy.busy -= 1
        legacy.used = asyncio.get_running_loop().time()
        route.learn(session.flow)
        session.close("a 2026-07-28 request is over once answered")
    return await exchange.answer.done()


def _refused(request: web.Request, body: bytes) -> web.Response | None:
    """The 400 a 2026-07-28 server gives a request whose envelope is incomplete (-32602), whose
    `MCP-Protocol-Version` header is not its `_meta` version (-32020), or whose version it does not
    speak (-32022, naming the one it does); None for a request it takes."""
    try:
        msg = loads(body)
    except ValueError:
        return None
    if not (isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg):
        return None
    meta = params_meta(msg)
    header = request.headers.get("mcp-protocol-version")
    if not isinstance(meta, dict) or PROTOCOL_KEY not in meta or CLIENT_CAPS_KEY not in meta:
        error = error_response(msg["id"], -32602, f"Invalid params: a {MODERN_ERA} request's _meta carries "
                               f"{PROTOCOL_KEY} and {CLIENT_CAPS_KEY}")
    elif meta[PROTOCOL_KEY] != header:
        error = error_response(msg["id"], -32020, "Header mismatch: MCP-Protocol-Version is not the request's "
                               f"_meta {PROTOCOL_KEY}")
    elif header != MODERN_ERA:
        error = error_response(msg["id"], -32022, "Unsupported protocol version",
                               {"supported": [MODERN_ERA], "requested": header})
    else:
        return None
    return web.Response(status=400, body=dumps(error), content_type="application/json", charset="utf-8")


def _legacy(route: HttpRoute, request: web.Request, body: bytes) -> Legacy:
    """The upstream session of this request's capability set, client info and credentials."""
    try:
        msg = loads(body)
    except ValueError:
        msg = None
    meta = params_meta(msg) if isinstance(msg, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    seen = json.dumps([meta.get(CLIENT_CAPS_KEY), meta.get(CLIENT_INFO_KEY), request.headers.get("Authorization")],
                      sort_keys=True)
    key = hashlib.sha256(seen.encode()).hexdigest()
    if route.eras is None:
        route.eras = {}
    if key not in route.eras:
        route.eras[key] = Legacy(LegacyServer(route.settings.host_era, lambda: MODERN_ERA, route.recorder))
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
        if self.stream is None:
            if answer and self.held is None:
                self.held = message
                return
            self.stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await self.stream.prepare(self.request)
            if self.held is not None:
                await self._event(self.held)
        await self._event(message)

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


@dataclass
class _Exchange:
    """One host request's way through the bridge and back."""

    proxy: OwnCalls
    route: HttpRoute
    session: Any
    legacy: Legacy
    headers: dict[str, str]
    answer: _Answer
    #: the ids this exchange gave its requests upstream → the host's own
    ours: dict[str, Any] = field(default_factory=dict)

    def own_id(self, frame: bytes) -> bytes:
        """A request with an id unique in the shared upstream session (hosts choose theirs alike)."""
        try:
            msg = loads(frame)
        except ValueError:
            return frame
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            return frame
        own = f"rb-h{next(self.legacy.ids)}"
        self.ours[own] = msg["id"]
        return dumps({**msg, "id": own})

    def host_id(self, frame: bytes) -> bytes:
        try:
            msg = loads(frame)
        except ValueError:
            return frame
        if isinstance(msg, dict) and "method" not in msg and isinstance(msg.get("id"), str) and msg["id"] in self.ours:
            return dumps({**msg, "id": self.ours[msg["id"]]})
        return frame

    async def carry(self, writes: list[Write]) -> None:
        """Perform the bridge's writes in order: POST what goes to the server (each message of its
        answer back into the bridge as it comes), hand what goes to the flow to the flow, and what
        the flow gives the host to the host."""
        bridge, session = self.legacy.bridge, self.session
        for write in writes:
            if write.to == HOST:
                for command in await session.driver.settle(await settled(session, self.host_id(write.data), PEER)):
                    if isinstance(command, Write) and command.to == HOST:
                        await self.answer.send(command)
                    elif isinstance(command, Write):
                        await self.carry(bridge.toward_server(self.own_id(command.data)))
                continue
            try:
                async for frame in _post(self.proxy, self.route, self.legacy, write.data, self.headers):
                    await self.carry(bridge.from_server(frame))
            except _UPSTREAM_FAILED as exc:
                self.route.recorder.log("upstream_error", why=self.route.shown(cause(exc)),
                                        during="a bridged 2025-11-25 request")
                msg = loads(write.data)
                if isinstance(msg, dict) and "id" in msg and "method" in msg:
                    await self.carry(bridge.from_server(dumps(upstream_error(self.route, msg["id"], exc))))


async def _post(proxy: OwnCalls, route: HttpRoute, legacy: Legacy, message: bytes,
                headers: dict[str, str]):
    """One POST to the 2025-11-25 server in the session's name; yields every message of its answer."""
    assert proxy.client is not None
    sent = {**headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if legacy.session_id is not None:
        sent[SESSION_HEADER] = legacy.session_id
    if legacy.bridge.state.opened is not None:
        sent["MCP-Protocol-Version"] = LEGACY_ERA
    async with asyncio.timeout(proxy.upstream_timeout):
        response = await proxy.client.post(route.target.url(route.rpc_path, ""), data=message, headers=sent)
    async with response:
        if legacy.session_id is None and response.headers.get(SESSION_HEADER):
            legacy.session_id = response.headers[SESSION_HEADER]
        if "text/event-stream" in response.headers.get("content-type", ""):
            async for event in events(response.content.iter_any(), proxy.limits.max_event_bytes):
                if event.data is not None:
                    yield event.data
        elif "json" in response.headers.get("content-type", ""):
            data = await read_answer(response, Holding(proxy.guard.budget), proxy.limits, release=True)
            if data.strip():
                yield data


def _listen(proxy: OwnCalls, route: HttpRoute, legacy: Legacy, headers: dict[str, str]) -> None:
    """Once the session is open: its GET stream, kept open for the session's life."""
    if legacy.stream is None and legacy.session_id is not None and legacy.bridge.state.opened is not None:
        legacy.stream = asyncio.get_running_loop().create_task(_stream(proxy, route, legacy, headers))


async def _stream(proxy: OwnCalls, route: HttpRoute, legacy: Legacy, headers: dict[str, str]) -> None:
    """The session's GET stream. What comes on it belongs to no request of a 2026-07-28 host, and a
    listen stream to carry it is not bridged yet: the bridge drops what such a host may not get
    unasked; the rest is logged, never silently lost."""
    assert proxy.client is not None
    sent = {**headers, "Accept": "text/event-stream", "MCP-Protocol-Version": LEGACY_ERA,
            SESSION_HEADER: legacy.session_id or ""}
    try:
        async with proxy.client.get(route.target.url(route.rpc_path, ""), headers=sent) as response:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                return
            async for event in events(response.content.iter_any(), proxy.limits.max_event_bytes):
                for write in legacy.bridge.from_server(event.data or b""):
                    if write.to == HOST:
                        route.recorder.warning("era_unrouted", why=f"a {LEGACY_ERA} server's message on its GET "
                                               f"stream has no {MODERN_ERA} listen stream to go on (not bridged yet)")
    except _UPSTREAM_FAILED as exc:
        route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="a bridged session's GET stream")


async def expire(proxy: OwnCalls, route: HttpRoute, idle_s: float) -> None:
    """The upstream sessions no host has used for ``idle_s`` seconds end (`--session-idle`)."""
    now = asyncio.get_running_loop().time()
    for key, legacy in list((route.eras or {}).items()):
        if legacy.busy == 0 and not legacy.opening.locked() and now - legacy.used > idle_s:
            del route.eras[key]
            await _end(proxy, route, legacy)


async def close(proxy: OwnCalls, route: HttpRoute) -> None:
    """Shutdown: every upstream session the route opened ends."""
    ending, route.eras = list((route.eras or {}).values()), {}
    await asyncio.gather(*(_end(proxy, route, legacy) for legacy in ending))


async def _end(proxy: OwnCalls, route: HttpRoute, legacy: Legacy) -> None:
    """One upstream session ends: its GET stream, then a DELETE (2025-11-25 sessions end so)."""
    if legacy.stream is not None:
        legacy.stream.cancel()
    if legacy.session_id is None or proxy.client is None:
        return
    try:
        async with asyncio.timeout(5):
            await (await proxy.client.delete(route.target.url(route.rpc_path, ""), headers={
                SESSION_HEADER: legacy.session_id, "MCP-Protocol-Version": LEGACY_ERA})).release()
    except _UPSTREAM_FAILED as exc:
        route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="ending a bridged session")
