"""`serve` in front of a 2026-07-28-only MCP server for 2025-11-25 hosts (issue 21, point 2): the
HTTP glue around the era bridge's core (`bridge.pipeline.eras.ModernServer`), which decides every
frame; this file only carries them.

Toward the host the proxy is the Streamable HTTP server, as for a stdio server behind `serve`
(`http.command`, whose sessions, POST answers and GET stream this reuses): it issues the
`Mcp-Session-Id` at the host's `initialize`, keeps the session's flow, and ends it on the host's
DELETE, after `--session-idle` without a request, or when `serve` stops. What the flow sends toward
the server goes through the session's bridge; each message the bridge sends upstream is a POST of
its own (2026-07-28 has no session: no GET, no DELETE), whose answer's messages come back through
the bridge as they arrive. The bridge's one `subscriptions/listen` is a POST held open; what it
carries goes to the host's GET stream. A `notifications/cancelled` for a POST in flight closes it
(how 2026-07-28 cancels over HTTP).
"""
from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiohttp
from aiohttp import web

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.mcp import LISTEN_METHOD, VERSION_HEADER, routing_headers
from bridge.jsonrpc import dumps, error_response, id_key, loads
from bridge.pipeline.commands import HOST, Write
from bridge.pipeline.eras import ModernServer
from bridge.state.scope import Scope
from bridge.transports.driver import FlowDriver, Timer, era_commands
from bridge.transports.guard import Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.command import INITIALIZE, ChildSession, outside_post, post
from bridge.transports.http.json_streams import json_lines
from bridge.transports.http.own_calls import OwnCalls
from bridge.transports.http.routes import SESSION_HEADER, HttpRoute
from bridge.transports.http.upstream_errors import UPSTREAM_ERROR, cause, upstream_error
from bridge.transports.sse import EventTooLarge, events

#: The host's headers a 2026-07-28 server must not get as they are: the proxy sets its own, and
#: one request's trace context would be another's (the session's headers go with all its POSTs).
_DROPPED = frozenset({"mcp-protocol-version", "mcp-method", "mcp-name", SESSION_HEADER, "last-event-id", "accept",
                      "content-type", "traceparent", "tracestate", "baggage"})
_UPSTREAM_FAILED = (aiohttp.ClientError, asyncio.TimeoutError, TooLarge, EventTooLarge)


def takes(route: HttpRoute, request: web.Request, body: bytes) -> bool:
    """A 2025-11-25 host's request on a route whose server speaks only 2026-07-28: one in a session
    (2026-07-28 has none), or an `initialize`. Anything else (a 2026-07-28 request, one of an era
    no bridge speaks) goes to the server as it came, and gets the answer it gets direct."""
    if route.protocol != "mcp" or route.settings.bridged_server_era != MODERN_ERA:
        return False
    return bool(request.headers.get(SESSION_HEADER)) or (
        request.method == "POST" and request.headers.get("mcp-protocol-version") != MODERN_ERA
        and INITIALIZE.search(body) is not None)


class Upstream:
    """One host session's way to the 2026-07-28 server: its bridge, the POSTs in flight (by the id
    key of the request each carries), the host's latest end-to-end headers. It is the session's
    `Link` (what the flow writes toward the server) and its `upstream` (route, proxy, bounds)."""

    def __init__(self, proxy: OwnCalls, route: HttpRoute):
        self.proxy, self.route = proxy, route
        self.bridge = ModernServer(route.settings.host_era, lambda: LEGACY_ERA, route.recorder, streams=True,
                                   input_wait_s=route.settings.input_wait_s)
        self.timer = Timer(self.bridge.clock, lambda now: self.carry(self.bridge.wake(now)))
        self.child = self  # `command.post` waits on `link.child.writable`: a POST upstream is never full
        self.writable = asyncio.Event()
        self.writable.set()
        self.server = f"the {MODERN_ERA} server {route.target.shown}"  # as a timeout's error names it
        self.queue_bytes = proxy.limits.max_response_bytes
        self.headers: dict[str, str] = dict(route.target.own)
        self.posts: dict[Any, asyncio.Task[None]] = {}
        self.session: BridgedSession | None = None

    # -- the session's Link ------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        self.carry(self.bridge.toward_server(data))

    def pause(self, session: ChildSession, on: bool) -> None:
        pass  # nothing reads ahead upstream: each POST's answer is read as the flow takes it

    def over(self, session: ChildSession) -> None:
        """More than `max_response_bytes` waits for the host: it does not read what it asked for."""
        end(self.route, session, "its host does not read what the server sends")

    def under(self, session: ChildSession) -> None:
        pass

    def leave(self, session: ChildSession) -> None:
        """The session ended: every POST in flight, its listen among them, is closed."""
        self.timer.close()
        for task in list(self.posts.values()):
            task.cancel()

    # -- the bridge's writes -----------------------------------------------------------------
    def carry(self, writes: list[Any]) -> None:
        """What the bridge wrote: up to the flow as the server's (``HOST``), or upstream; its timers
        to its own."""
        for write in era_commands(self.bridge, writes, self.timer):
            if write.to == HOST:
                assert self.session is not None
                self.session.from_child(write.data)
            else:
                self._send(write.data)

    def _send(self, data: bytes) -> None:
        try:
            msg = loads(data)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):  # 2026-07-28 has no batch, and the bridge passes on what it cannot read
            self.route.recorder.warning("era_unrouted", why=f"a message that is not one JSON-RPC object has no "
                                        f"{MODERN_ERA} POST to go in")
            return
        method = msg.get("method")
        if method == "notifications/cancelled":
            gone = self.posts.get(id_key((msg.get("params") or {}).get("requestId")))
            if gone is not None:  # closing its stream is the cancellation
                gone.cancel()
                return
        task = asyncio.get_running_loop().create_task(self._post(data, msg))
        if "id" in msg and isinstance(method, str):
            key = id_key(msg["id"])
            self.posts[key] = task  # (a retry takes its request's place)
            task.add_done_callback(lambda done: self.posts.pop(key) if self.posts.get(key) is done else None)

    async def _post(self, data: bytes, msg: dict[str, Any]) -> None:
        """One message upstream; every message of its answer back through the bridge as it comes
        (a listen's to the host's GET stream). A request the upstream did not answer (it failed, or
        its answer held no JSON-RPC response) is answered with the JSON-RPC error that says why."""
        listen = msg.get("method") == LISTEN_METHOD
        request = "id" in msg and "method" in msg
        answered = not request
        try:
            async for frame in _exchange(self.proxy, self.route, data, msg, self.headers, timed=not listen):
                answered = answered or _answers(frame, msg["id"])
                self._from_server(frame, listen)
            if not answered:
                why = (f"reminder-bridge route {self.route.name!r}: the {MODERN_ERA} server's answer to "
                       f"{msg['method']} held no JSON-RPC response")
                self._from_server(dumps(error_response(msg["id"], UPSTREAM_ERROR, why)), False)
            if listen:  # (one the bridge closed for a new one never gets here: its task was cancelled)
                self.route.recorder.warning("era_listen_ended", why=f"the {MODERN_ERA} server ended the listen that "
                                            "carries a 2025-11-25 host's notifications; none come until the host "
                                            "subscribes or sets its log level anew")
        except _UPSTREAM_FAILED as exc:
            self.route.recorder.log("upstream_error", why=self.route.shown(cause(exc)),
                                    during="a bridged 2025-11-25 host's request")
            if request:
                self._from_server(dumps(upstream_error(self.route, msg["id"], exc)), False)

    def _from_server(self, frame: bytes, ambient: bool) -> None:
        assert self.session is not None
        self.session.ambient = ambient
        try:
            self.carry(self.bridge.from_server(frame))
        finally:
            self.session.ambient = False


def _answers(frame: bytes, msg_id: Any) -> bool:
    try:
        msg = loads(frame)
    except ValueError:
        return False
    return isinstance(msg, dict) and "method" not in msg and msg.get("id") == msg_id


class BridgedSession(ChildSession):
    """A 2025-11-25 host's session in front of the 2026-07-28 server: a `command` session whose
    frames come from POSTs, those of the upstream listen (``ambient``) onto the GET stream."""

    upstream: Upstream  # type: ignore[assignment]
    ambient = False

    def write(self, command: Write) -> None:
        if self.ambient and command.to == HOST and any(not s.task_done for s in self.streams):
            self._queue(self.pushes, command, self.pushed)
            return
        super().write(command)


async def _exchange(proxy: OwnCalls, route: HttpRoute, data: bytes, msg: dict[str, Any], headers: dict[str, str],
                    timed: bool):
    """One POST to the 2026-07-28 server, the envelope's headers mirrored (`MCP-Protocol-Version`,
    `Mcp-Method`, `Mcp-Name`): yields each message of its answer as it comes: SSE, JSON lines on a
    body with no Content-Length, or one JSON body."""
    sent = {**headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            VERSION_HEADER: MODERN_ERA, **routing_headers(msg)}
    async with asyncio.timeout(proxy.upstream_timeout if timed else None):
        response = await proxy.upstream("POST", route.target.url(route.rpc_path, ""), data=data, headers=sent,
                                        allow_redirects=True)
    async with response:
        if "text/event-stream" in response.headers.get("content-type", ""):
            async for event in events(response.content.iter_any(), proxy.limits.max_event_bytes):
                if event.data is not None:
                    yield event.data
        elif "json" in response.headers.get("content-type", "") and response.headers.get("content-length") is None:
            async for line, _ in json_lines(response, proxy.limits.max_response_bytes):  # (a listen's, say)
                if line.strip():
                    yield line
        elif "json" in response.headers.get("content-type", ""):
            answer = await read_answer(response, Holding(proxy.guard.budget), proxy.limits, release=True)
            if answer.strip():
                yield answer


async def handle(proxy: OwnCalls, route: HttpRoute, request: web.Request, body: bytes) -> web.StreamResponse:
    """A 2025-11-25 host's request: POST (JSON-RPC), GET (the session's stream), DELETE (its end)."""
    session_id = request.headers.get(SESSION_HEADER)
    held = route.sessions.get(session_id) if session_id else None
    session = held if isinstance(held, BridgedSession) else None
    answered = await outside_post(proxy, route, request, body, session)
    if answered is not None:
        return answered
    if session is None:  # an initialize
        session = _start(proxy, route)
    route.rpc_path = route.below(request.path)
    session.upstream.headers = {k: v for k, v in proxy.upstream_headers(route, request).items()
                                if k.lower() not in _DROPPED}
    return await post(proxy, session, request, body)


def _start(proxy: OwnCalls, route: HttpRoute) -> BridgedSession:
    """A new session: its id, its flow, its way upstream."""
    session_id = secrets.token_urlsafe(24)
    upstream = Upstream(proxy, route)
    flow = route.new_flow(scope=Scope.mcp_session(route.name, session_id))
    session = upstream.session = BridgedSession(upstream, flow)  # type: ignore[arg-type]
    session.link = upstream  # type: ignore[assignment]
    session.driver = FlowDriver(flow, session.write, session.write, lambda on: None)
    session.id = session_id
    route.recorder.track(session)
    route.sessions.put(session_id, session)
    return session


def end(route: HttpRoute, session: ChildSession, why: str) -> None:
    """``session`` is over (its host does not read): out of the route's table, and closed."""
    if session.id is not None and route.sessions.get(session.id) is session:
        route.sessions.close(session.id)
    session.close(why)


def close(route: HttpRoute) -> None:
    """Shutdown: every bridged session ends (its GET stream, its listen upstream, its POSTs)."""
    for session in list(route.sessions):
        if isinstance(session, BridgedSession):
            session.close("the proxy is stopping")
