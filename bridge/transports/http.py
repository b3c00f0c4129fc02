"""`reminder-bridge serve`: HTTP (MCP Streamable HTTP in both eras, the 2024-11-05 HTTP+SSE
transport, A2A JSON-RPC + SSE) and WebSocket routes in front of remote servers and agents.

Built on aiohttp (server and client) and websockets. Like the stdio transport, it knows frames
and HTTP, never dialects: every JSON-RPC message goes through a sans-I/O pipeline, SSE is relayed
one event at a time, and bytes the pipeline passes are forwarded unchanged.

Which pipeline: one per MCP 2025-11-25 session (`Mcp-Session-Id`, held in a bounded table with
sliding idle expiry), one per request otherwise (a 2026-07-28 request is self-contained; an A2A
request shares only the route's per-task reminder queues).  No reminder state is ever shared
between two sessions or two requests (spec §10).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import websockets
from aiohttp import web

from bridge.jsonrpc import classify, dumps, error_response
from bridge.pipeline.commands import HOST, PEER, Call, Command, Forward, Reply, Send, receipts_of
from bridge.pipeline.a2a import TaskBook
from bridge.assembly import make_flow
from bridge.pipeline.flow import Flow, Outcome
from bridge.policy import Policy
from bridge.rules import Limits, RouteSettings
from bridge.state import StateUnavailable
from bridge.state.queues import ReminderQueues
from bridge.state.scope import MCP_SESSION, Scope
from bridge.telemetry import Recorder, Tracing, register_collector
from bridge.transports.forwarding import (
    HOP_BY_HOP, Upstream, end_to_end, origin_allowed, redact, upstream_headers, with_own,
)
from bridge.transports.driver import FlowDriver
from bridge.transports.guard import Guard, Holding
from bridge.transports.sessions import Session, SessionTable
from bridge.transports.sse import Event, EventTooLarge, SseSplitter, events, message_event

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
SESSION_HEADER = "mcp-session-id"
MODERN_VERSION = "2026-07-28"
#: The answer to a JSON-RPC request the upstream could not give (spec §8.3).
UPSTREAM_ERROR = -32603
#: How often the session tables drop idle sessions (each session's own timers are its flow's).
HOUSEKEEPING = 5.0


class Refused(Exception):
    """A request the proxy answers itself with an HTTP error (sizes, budgets, timeouts)."""

    def __init__(self, status: int, text: str, reason: str, retry_after: int | None = None, close: bool = False):
        self.status, self.text, self.reason, self.retry_after, self.close = status, text, reason, retry_after, close
        super().__init__(text)

    def response(self) -> web.Response:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        response = web.Response(status=self.status, text=f"reminder-bridge: {self.text}\n", headers=headers)
        if self.close:
            response.force_close()
        return response


class TooLarge(Exception):
    """An upstream answer over `max_response_bytes`, or more than the memory budget has room for."""

    def __init__(self, text: str, status: int = 502):
        self.status = status
        super().__init__(text)


@dataclass
class HttpRoute:
    """One proxied upstream: a path prefix at the proxy, an upstream base URL, a protocol."""

    name: str
    protocol: str
    prefix: str
    upstream: str
    settings: RouteSettings
    dialects: dict[str, str | None] = field(default_factory=dict)
    policy: Policy | None = None
    tracing: Tracing | None = None
    log_level: str = "warning"
    limits: Limits = field(default_factory=Limits)
    recorder: Recorder = field(init=False)
    target: Upstream = field(init=False)
    sessions: SessionTable = field(init=False)
    #: A2A: what the route keeps per task (queued and held reminders), shared by every request's flow
    tasks: TaskBook = field(init=False)
    #: A2A: the session whose timer releases the route's held reminders (requests come and go)
    keeper: Session | None = field(init=False, default=None)
    #: sessions whose requests are in flight (a per-request pipeline lives only while here)
    live: set[Session] = field(init=False, default_factory=set)
    #: what the server's handshake or card said, to seed per-request pipelines
    learned: dict[str, Any] = field(init=False, default_factory=dict)
    #: where below the route the host posts JSON-RPC: the proxy's own requests go there too (on the
    #: upstream the route has when they are made)
    rpc_path: str = field(init=False, default="")
    #: upstreams a reload moved the route away from (by `Upstream.key`): answers still in flight
    #: from them are scrubbed of their secrets too
    former: dict[tuple, Upstream] = field(init=False, default_factory=dict)
    proxy: Any = field(init=False, default=None)  # the HttpProxy serving the route (runs sessions' timers and calls)

    def __post_init__(self) -> None:
        self.prefix = route_prefix(self.prefix)
        self.recorder = Recorder(route=self.name, log_level=self.log_level, tracing=self.tracing)
        if self.policy is None:
            self.policy = Policy(self.settings, route=self.name)
        self.target = upstream_of(self.upstream, self.settings)
        self.sessions = SessionTable(self.limits.max_sessions, self.limits.session_idle_s, self.recorder.session_ended)
        self.tasks = TaskBook(queued=ReminderQueues(limit=self.settings.trust.max_pending_per_session,
                                                    idle_s=self.limits.session_idle_s,
                                                    max_keys=self.limits.max_sessions, state=self.shared))
        self.recorder.track(self.tasks)  # its queues count once in the pending gauge
        self.recorder.status_source = self.status

    @property
    def shared(self) -> Any:
        """The fleet's shared state (Redis), or None: this process only."""
        return self.policy.shared if self.policy is not None else None

    def status(self) -> dict[str, Any]:
        """What the admin port's status page shows of this route (see `Recorder.status_source`)."""
        return {"transport": "serve", "protocol": self.protocol, "stage": self.settings.stage,
                "settings": self.settings, "policy": self.policy, "sessions": len(self.sessions)}

    @property
    def is_websocket(self) -> bool:
        return self.upstream.startswith(("ws://", "wss://"))

    def new_flow(self, **kwargs: Any) -> Flow:
        if self.protocol == "a2a":
            kwargs.setdefault("tasks", self.tasks)
        return make_flow(self.protocol, self.settings, self.recorder, policy=self.policy,
                         **{**self.dialects, **kwargs})

    def _sessions(self) -> list[Session]:
        keeper = [self.keeper] if self.keeper is not None else []
        return [*self.sessions, *self.live, *keeper]

    def flows(self) -> list[Flow]:
        """Every live pipeline of this route (a reload reconfigures them all)."""
        found = {id(s.flow): s.flow for s in self._sessions()}
        return list(found.values())

    def refusal(self, settings: RouteSettings, after: dict[str, RouteSettings]) -> tuple[str, str] | None:
        """What a reload cannot move while the route runs (`bridge.policy.reload.apply_reload`): the
        route out of `serve` (no upstream), between HTTP and WebSocket (how clients connect), or onto
        a path another running route serves."""
        if settings.upstream is None:
            return "upstream", "serve needs an upstream for every route it serves (a route leaves at a restart)"
        if settings.upstream.startswith(("ws://", "wss://")) != self.is_websocket:
            return "upstream", ("moving the upstream between HTTP and WebSocket changes how clients connect; "
                                "that needs a restart")
        prefix = route_prefix(settings.path)
        taken = next((name for name, other in after.items() if name != self.name and route_prefix(other.path) == prefix),
                     None)
        if prefix != self.prefix and taken is not None:
            return "path", f"path {prefix or '/'} is where route {taken!r} answers"
        return None

    def apply(self, settings: RouteSettings, policy: Policy) -> dict[str, dict[str, str]]:
        """New settings for the requests to come. A new `upstream` takes every new request (an
        existing session's too: an upstream that does not know the session answers 404, and an MCP
        host starts a new one); a new `path` moves the route there. Requests in flight and open
        streams finish where they started. Returns what moved ({setting: {from, to}})."""
        moved: dict[str, dict[str, str]] = {}
        assert settings.upstream is not None  # `refusal` said so
        target = upstream_of(settings.upstream, settings)
        if target.key != self.target.key:
            old = self.former[self.target.key] = self.target
            self.upstream, self.target = settings.upstream, target
            self.former.pop(target.key, None)
            if target.shown != old.shown:
                self.learned = {}  # what the old upstream declared says nothing of the new one
                moved["upstream"] = {"from": old.shown, "to": target.shown}
            if old.own.keys() != target.own.keys() or settings.headers != self.settings.headers:
                moved["headers"] = {"from": ", ".join(old.own) or "none", "to": ", ".join(target.own) or "none"}
            for session in self._sessions():  # the proxy's own requests for them: never the old credentials
                if session.headers:
                    session.headers = with_own(session.headers, target.own, former=old.own)
        prefix = route_prefix(settings.path)
        if prefix != self.prefix:
            moved["path"] = {"from": self.prefix or "/", "to": prefix or "/"}
            self.prefix = prefix
            if self.proxy is not None:
                self.proxy.sort_routes()
        self.settings, self.policy = settings, policy
        for flow in self.flows():
            flow.reconfigure(settings, policy)
        return moved

    def allows(self, origin: str | None) -> bool:
        return origin_allowed(origin, self.settings.allowed_origins)

    async def session_for(self, request: web.Request) -> tuple[Session, bool]:
        """The pipeline for this request, and whether it is one the route holds (else it is new, and
        lives for this request unless the upstream's answer makes it a session, see `adopt`).

        An MCP session id the proxy does not hold (made up, evicted, expired, or from before a
        restart) gets fresh state of its own, with the host's dialect unknown: `none` unless the
        rules name one (spec §10), never another session's pipeline.  With shared state, a session
        another replica negotiated goes on here with what its handshake settled.
        """
        if self.protocol == "mcp":
            session_id = request.headers.get(SESSION_HEADER)
            if session_id is not None and (held := self.sessions.get(session_id)) is not None:
                if held.recorded is None and self.shared is not None:  # taken up before another replica
                    await self._catch_up(held)  # recorded the handshake it saw: look again
                self.remember(held, refresh=True)
                return held, True
            if request.query_string and (held := self.sessions.get("q:" + request.query_string)) is not None:
                return held, True  # 2024-11-05 HTTP+SSE: POSTs name the stream's session in the query
            if request.headers.get("mcp-protocol-version") == MODERN_VERSION:
                # a request that is its own session: its outbox is its identity's, if the rules name one
                return self.open_session(self.new_flow(scope=self.sessionless_scope(request), **self._seeds())), False
            if session_id is None:  # an initialize, or a server without sessions: the answer tells
                return self.open_session(self.new_flow(scope=self.sessionless_scope(request))), False
            # a session the proxy does not hold (a restart, another replica, an id made up): its own
            # state, held at once so that its concurrent requests share it, until the upstream refuses it
            flow = self.new_flow(scope=Scope.mcp_session(self.name, session_id))
            record = await self._record(session_id)
            resumed = flow.resume(record)
            session = self.open_session(flow)
            session.driver.perform(resumed)
            session.id, session.recorded, session.recorded_at = session_id, record, flow.clock()
            session.provisional = record is None
            self.sessions.put(session_id, session)
            return session, True
        if self.protocol == "a2a":
            return self.open_session(self.new_flow(scope=Scope.request(self.name), **self._seeds())), False
        return self.open_session(self.new_flow(scope=Scope.request(self.name))), False

    def sessionless_scope(self, request: web.Request) -> Scope:
        """A request with no MCP session: the identity the route's rules name (`outbox.identity`),
        when it carries it, else its own (nothing of it outlives its answer)."""
        rule = self.settings.identity
        value = request.headers.get(rule.partition(":")[2]) if rule is not None else None
        return Scope.identity(self.name, rule, value) if rule is not None and value else Scope.request(self.name)

    def open_session(self, flow: Flow) -> Session:
        session = Session(flow, self.settings.trust.max_pending_per_session)
        if self.protocol == "a2a":  # what a request holds belongs to its task: the route's keeper wakes for it
            session.driver, session.shared_driver = self._keeper().driver, True
        else:
            session.driver = self.proxy.driver_for(self, session)
        self.recorder.track(session)  # its waiting frames count in the pending gauge
        return session

    def _keeper(self) -> Session:
        if self.keeper is None:
            self.keeper = Session(self.new_flow())
            self.keeper.driver = self.proxy.driver_for(self, self.keeper)
        return self.keeper

    def _seeds(self) -> dict[str, Any]:
        """What the server declared, for a pipeline that will not see the handshake itself."""
        seeds: dict[str, Any] = {}
        if self.learned.get("peer_dialect") and not self.dialects.get("peer_dialect"):
            seeds["peer_dialect"] = self.learned["peer_dialect"]
        if self.protocol == "mcp" and "peer_declared" in self.learned:
            seeds["peer_declared"] = self.learned["peer_declared"]
        return seeds

    def learn(self, flow: Flow) -> None:
        """Remember what a pipeline learned about the server (its handshake, the A2A card)."""
        if flow.peer.learned is None:
            return
        self.learned = {"peer_dialect": flow.peer.learned}
        declared = getattr(getattr(flow, "state", None), "peer_declared", None)
        if self.protocol == "mcp" and declared is not None:
            self.learned["peer_declared"] = declared

    def _record_key(self, session_id: str) -> str:
        """Where another replica finds what this session's handshake settled (its scope digests the id)."""
        return Scope.mcp_session(self.name, session_id).key("record")

    async def _catch_up(self, session: Session) -> None:
        """A session held without its handshake goes on with what another replica recorded of it."""
        record = await self._record(session.id)  # type: ignore[arg-type]
        if record is not None:
            session.flow.restore(record)
            session.recorded, session.recorded_at = record, session.flow.clock()

    async def _record(self, session_id: str) -> dict[str, Any] | None:
        """Another replica's record of this session, its idle time restarted; None when there is no
        shared state, no record, or the state is away (the session then starts afresh)."""
        if self.shared is None:
            return None
        try:
            return await self.shared.get_record(self._record_key(session_id), ttl_s=self.limits.session_idle_s)
        except StateUnavailable:
            return None

    def remember(self, session: Session, refresh: bool = False) -> None:
        """Write what the session's handshake settled to shared state, for the other replicas: once
        it changes, and again (``refresh``) before a quarter of its idle time has gone, so a session
        busy on one replica stays known to the rest.  Never awaited by a request."""
        record = self._due_record(session, refresh)
        if record is not None:
            self.proxy._spawn(self._put_record(session.id, record))  # type: ignore[arg-type]

    async def record_before_answer(self, session: Session) -> None:
        """The record of a handshake the flow just settled, written before its answer reaches the host:
        a host that sends its next request to another replica at once finds the session there."""
        record = self._due_record(session, False)
        if record is not None:
            await self._put_record(session.id, record)  # type: ignore[arg-type]

    def _due_record(self, session: Session, refresh: bool) -> dict[str, Any] | None:
        """The session's record when shared state should get it now (it changed, or ``refresh`` and
        it is getting old), marked as written; else None."""
        if self.shared is None or session.id is None or self.proxy is None:
            return None
        record = session.flow.negotiated()
        now = session.flow.clock()
        if record is None or (record == session.recorded and
                              (not refresh or now - session.recorded_at < self.limits.session_idle_s / 4)):
            return None
        session.recorded, session.recorded_at = record, now
        return record

    async def _put_record(self, session_id: str, record: dict[str, Any]) -> None:
        try:
            await self.shared.put_record(self._record_key(session_id), record, self.limits.session_idle_s)
        except StateUnavailable:
            pass  # closed and away: the session goes on here; another replica starts it afresh

    def confirm(self, session: Session, upstream: aiohttp.ClientResponse) -> bool:
        """A session taken up without its handshake stays once the upstream answers it (it knows the
        id); one the upstream refuses goes, and takes no room."""
        if not session.provisional:
            return True
        if upstream.status >= 400:
            self.sessions.forget(session.id, session)  # type: ignore[arg-type]
            return False
        session.provisional = False
        return True

    def adopt(self, session: Session, request: web.Request, upstream: aiohttp.ClientResponse) -> bool:
        """A new MCP 2025-11-25 pipeline becomes a session once the upstream accepted it: by the id
        its answer names, else the one the host sent. An id the upstream refused takes no room."""
        if self.protocol != "mcp" or upstream.status >= 400:
            return False
        if request.headers.get("mcp-protocol-version") == MODERN_VERSION:
            return False
        session_id = upstream.headers.get(SESSION_HEADER) or request.headers.get(SESSION_HEADER)
        if session_id:
            session.id = session_id
            if session.flow.scope.kind != MCP_SESSION:  # the answer to initialize named the session
                session.flow.bind(Scope.mcp_session(self.name, session_id))
            self.sessions.put(session_id, session)
        return bool(session_id)

    def below(self, path: str) -> str:
        """A path at the proxy as seen below the route's prefix."""
        return path[len(self.prefix):] if path.startswith(self.prefix) else path

    def upstream_url(self, path: str, query: str) -> str:
        return self.target.url(self.below(path), query)

    def to_proxy(self, url: str, request: web.Request) -> str:
        """An upstream URL as the caller must see it: at the proxy, under this route's prefix."""
        parts = urlsplit(url)
        if parts.netloc and parts.netloc.rpartition("@")[2] != self.target.netloc:
            return url  # somewhere else entirely: not ours to redirect
        path = parts.path
        base_path = self.target.path.rstrip("/")
        if base_path and path.startswith(base_path):
            path = path[len(base_path):]
        if path and not path.startswith("/"):
            path = "/" + path
        path = self.prefix + path  # an empty path stays empty: no trailing slash the upstream did not write
        if not parts.netloc:
            return urlunsplit(("", "", path or "/", parts.query, parts.fragment))
        return urlunsplit((request.scheme, request.host, path, parts.query, parts.fragment))

    def shown(self, text: str) -> str:
        """``text`` safe to show a client or a log: the upstream URL's secrets replaced (and those of
        the upstreams it had before a reload)."""
        text = self.target.scrub(text)
        for old in self.former.values():
            text = old.scrub(text)
        return text


def upstream_of(url: str, settings: RouteSettings) -> Upstream:
    """The upstream a route's settings name: its URL with the route's `headers`, mounted at the
    route's `path` if it has one (docs/http.md, "Paths")."""
    return Upstream(url, settings.headers, mounted=settings.path is not None)


def route_prefix(path: str | None) -> str:
    """Where a route answers at the proxy: its `path` without a trailing slash ("" for every path)."""
    return (path or "").rstrip("/")


class HttpProxy:
    def __init__(self, routes: list[HttpRoute], upstream_timeout: float = 300.0, limits: Limits | None = None,
                 guard: Guard | None = None):
        self.routes = list(routes)
        self.sort_routes()
        for route in self.routes:
            route.proxy = self
        self.upstream_timeout = upstream_timeout
        self.limits = limits or Limits()
        #: connections, timeouts and the memory budget; `serve` wraps its listener with it
        self.guard = guard or Guard(self.limits, self.routes[0].recorder if self.routes else Recorder())
        register_collector(self.guard)
        self.client: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=self.limits.max_body_bytes)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._start)
        self.app.on_cleanup.append(self._stop)
        self._housekeeping: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def _start(self, _: web.Application) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        # no cookie jar: one client's upstream cookies must never ride on another client's requests
        # (a jar would store Set-Cookie from every answer and add it to every later request)
        self.client = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                            cookie_jar=aiohttp.DummyCookieJar(),
                                            timeout=aiohttp.ClientTimeout(total=None, connect=10))
        self._housekeeping = asyncio.create_task(self._expire_sessions())

    async def _stop(self, _: web.Application) -> None:
        if self._housekeeping:
            self._housekeeping.cancel()
        for route in self.routes:
            for session in list(route.sessions):
                session.close("the proxy is stopping")
        if self.client:
            await self.client.close()

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING)
            for route in self.routes:
                route.sessions.expire()

    # -- what sessions do on their own -------------------------------------------------------------
    def driver_for(self, route: HttpRoute, session: Session) -> FlowDriver:
        """A session's timers and deferred work: what its flow sends on its own (a coalesced reminder
        released, an outbox poll) goes to the session's host stream, or upstream."""

        def write(command: Command) -> None:
            if command.to == HOST:  # type: ignore[union-attr]
                self._to_host(session, [command])
            else:
                self._spawn(self._post(route, session, command.data))  # type: ignore[union-attr]

        return FlowDriver(session.flow, write, lambda call: self._spawn(self._call_and_push(route, session, call)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _to_host(self, session: Session, messages: list[Command]) -> None:
        """Messages the session's flow sends on its own: on its open stream, else ahead of its next answer."""
        stream = next((s for s in session.streams if not s.task_done), None)
        if stream is None:
            session.hold(messages)
            return
        self._spawn(self._write_messages(session, stream.response, messages))

    async def _write_messages(self, session: Session, response: web.StreamResponse, messages: list[Command]) -> bool:
        """``messages`` on an open SSE answer, one event each, each reported written once it is; if the
        stream ends under us, the rest wait for the session's next answer (False)."""
        for i, message in enumerate(messages):
            try:
                await response.write(message_event(message.data))  # type: ignore[union-attr]
            except (ConnectionError, RuntimeError):
                session.hold(messages[i:])
                return False
            _written(session, [message])
        return True

    async def _call_and_push(self, route: HttpRoute, session: Session, call: Call) -> None:
        """A call the flow made on its own: what its answer gives the host goes to the session."""
        host = [c for c in await self._calls(route, session, [call], None) if c.to == HOST]  # type: ignore[union-attr]
        if host:
            self._to_host(session, host)

    def sort_routes(self) -> None:
        """The longest prefix first, so `route_for` picks the most specific route (again after a
        reload moved one). In place: whoever holds the list sees the new order."""
        self.routes.sort(key=lambda r: len(r.prefix), reverse=True)

    def route_for(self, path: str) -> HttpRoute | None:
        for route in self.routes:
            if not route.prefix or path == route.prefix or path.startswith(route.prefix + "/"):
                return route
        return None

    # -- dispatch ------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        connection = self.guard.connection(request.transport)
        if connection is not None:
            connection.request_started()
        holding = Holding(self.guard.budget)
        try:
            return await self._dispatch(request, holding)
        except Refused as refused:
            return refused.response()
        finally:
            holding.release()
            if connection is not None:
                connection.request_finished()

    async def _dispatch(self, request: web.Request, holding: Holding) -> web.StreamResponse:
        route = self.route_for(request.path)
        if route is None:
            return web.Response(status=404, text=f"reminder-bridge: no route for {request.path}\n")
        origin = request.headers.get("Origin")
        if not route.allows(origin):
            route.recorder.request_refused("origin")
            route.recorder.warning("origin_refused", origin=origin[:200],
                                   why="not in the route's allowed_origins (a browser page of another site)")
            return web.Response(status=403, text=f"reminder-bridge: route {route.name!r} does not accept requests "
                                                 f"from Origin {origin[:200]} (allowed_origins)\n")
        if route.is_websocket:
            return await self.websocket(route, request)
        if route.protocol == "a2a" and request.method == "GET" and request.path.endswith(
                CARD_PATHS + ("/extendedAgentCard",)):
            return await self.agent_card(route, request, holding)
        body = await self._read_body(route, request, holding)
        if request.method == "POST" and "json" in request.headers.get("content-type", ""):
            return await self.jsonrpc(route, request, body, holding)
        # a GET may open a stream of server messages (MCP 2025-11-25, HTTP+SSE): it shares the session's pipeline
        session, kept = await route.session_for(request) if request.method == "GET" else (None, False)
        response = await self.relay(route, request, body, session, kept=kept, holding=holding)
        if request.method == "DELETE" and SESSION_HEADER in {k.lower() for k in request.headers}:
            route.sessions.close(request.headers[SESSION_HEADER])
        return response

    async def _read_body(self, route: HttpRoute, request: web.Request, holding: Holding) -> bytes:
        """The request body, within `max_body_bytes`, the memory budget and `body_timeout_s`."""
        if not request.body_exists:
            return b""
        limits = self.limits
        length = request.content_length
        if length is not None and length > limits.max_body_bytes:
            route.recorder.request_refused("max_body_bytes")
            raise Refused(413, f"request body of {length} bytes is over max_body_bytes = {limits.max_body_bytes}",
                          "max_body_bytes")
        if length is not None and not holding.take(length):
            raise self._over_budget(route)
        content = request.content
        if length is not None and content.is_eof():  # all of it came with the headers: no waiting, no timer
            return content.read_nowait()
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(limits.body_timeout_s):
                async for chunk in content.iter_any():
                    size += len(chunk)
                    if size > limits.max_body_bytes:
                        route.recorder.request_refused("max_body_bytes")
                        raise Refused(413, f"request body over max_body_bytes = {limits.max_body_bytes}",
                                      "max_body_bytes")
                    if length is None and not holding.take(len(chunk)):
                        raise self._over_budget(route)
                    chunks.append(chunk)
        except TimeoutError:
            self.guard.timeouts.labels("body").inc()
            raise Refused(408, f"request body not received within body_timeout_s = {limits.body_timeout_s:g}",
                          "body_timeout", close=True) from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _over_budget(self, route: HttpRoute) -> Refused:
        route.recorder.request_refused("max_inflight_bytes")
        route.recorder.warning("memory_budget_full", max_inflight_bytes=self.limits.max_inflight_bytes,
                               why="requests in flight hold the whole budget; this one is refused with 503")
        return Refused(503, f"the proxy holds max_inflight_bytes = {self.limits.max_inflight_bytes} of requests "
                            f"in flight; retry shortly", "max_inflight_bytes", retry_after=1)

    # -- JSON-RPC over POST ----------------------------------------------------------------
    async def jsonrpc(self, route: HttpRoute, request: web.Request, body: bytes,
                      holding: Holding) -> web.StreamResponse:
        """The host's JSON-RPC request through its session's flow: the proxy's own calls go first
        (spec §5: inject, then forward), then the request itself, or the proxy's own answer."""
        route.rpc_path = route.below(request.path)
        session, kept = await route.session_for(request)
        headers = session.headers = self._upstream_headers(route, request)  # the proxy's own requests reuse them
        commands = await _settled(session.flow, body, HOST, request.headers)
        if len(commands) == 1 and type(commands[0]) is Forward:
            return await self.relay(route, request, body, session, kept=kept, holding=holding,
                                    headers=headers)  # the common case
        commands = await session.driver.settle(commands)
        main: Forward | Send | None = None
        calls: list[Call] = []
        host: list[Command] = []
        for command in commands:
            kind = type(command)
            if kind is Call:
                calls.append(command)  # type: ignore[arg-type]
            elif command.to == PEER and main is None and kind in (Forward, Send):  # type: ignore[union-attr]
                main = command  # type: ignore[assignment]
            elif command.to == HOST:  # type: ignore[union-attr]
                host.append(command)
        if calls:
            host += await self._calls(route, session, calls, request)
        if main is not None:
            return await self.relay(route, request, main.data, session, kept=kept, holding=holding, headers=headers,
                                    rewritten=main if type(main) is Send else None,
                                    trace=session.flow.trace_context())
        route.learn(session.flow)
        try:
            return await self._reply(host, request, session)
        finally:
            if session.provisional:  # an id no upstream confirmed takes no room (made-up ids cannot evict)
                route.sessions.forget(session.id, session)  # type: ignore[arg-type]
            if not kept or session.provisional:
                session.close("the request was answered by the proxy; nothing of it outlives the request")

    async def _calls(self, route: HttpRoute, session: Session, calls: list[Call],
                     request: web.Request | None) -> list[Command]:
        """POST the proxy's own requests upstream and feed every answer back to the flow that asked;
        returns what the answers give the host (e.g. the reply to an inject checked with `GetTask`).
        An upstream that cannot answer is told to the flow as a JSON-RPC error for its call."""
        flow = session.flow
        headers = dict(session.headers) if session.headers else dict(route.target.own)
        headers["Content-Type"] = "application/json"
        out: list[Command] = []
        for call in calls:
            answers: list[bytes] = []
            try:
                async for frame in self._exchange(route, call.data, headers):
                    answers.append(frame)
            except (aiohttp.ClientError, asyncio.TimeoutError, TooLarge, EventTooLarge) as exc:
                route.recorder.log("upstream_error", why=route.shown(_cause(exc)), during="the proxy's own request")
                answers = [dumps(_upstream_error(route, call.id, exc))]
            for frame in answers:
                for command in await session.driver.settle(_through(flow, frame, PEER)):
                    if type(command) is Call:
                        out += await self._calls(route, session, [command], request)  # type: ignore[list-item]
                    elif command.to == HOST:  # type: ignore[union-attr]
                        out.append(command)
        return out

    async def _post(self, route: HttpRoute, session: Session, message: bytes) -> None:
        """A message the flow sends upstream on its own, answer unread (nothing waits for it)."""
        try:
            async for _ in self._exchange(route, message, {**(session.headers or {}), "Content-Type": "application/json"}):
                pass
        except (aiohttp.ClientError, asyncio.TimeoutError, TooLarge, EventTooLarge) as exc:
            route.recorder.log("upstream_error", why=route.shown(_cause(exc)), during="the proxy's own message")

    async def _exchange(self, route: HttpRoute, message: bytes, headers: dict[str, str]) -> AsyncIterator[bytes]:
        """One JSON-RPC POST upstream (to the endpoint the host last used); yields every message of
        its answer, JSON or SSE."""
        assert self.client is not None
        url = route.target.url(route.rpc_path, "")
        async with self.client.post(url, data=message, headers=headers) as response:
            if "text/event-stream" in response.headers.get("content-type", ""):
                async for event in events(response.content.iter_any(), self.limits.max_event_bytes):
                    if event.data is not None:
                        yield event.data
            else:
                data = await self._read_answer(response, Holding(self.guard.budget), release=True)
                if data.strip():
                    yield data

    def _upstream_headers(self, route: HttpRoute, request: web.Request, websocket: bool = False) -> dict[str, str]:
        return upstream_headers(request.headers, client=request.remote, host=request.host, scheme=request.scheme,
                                own=route.target.own, websocket=websocket)

    async def _read_answer(self, upstream: aiohttp.ClientResponse, holding: Holding, release: bool = False) -> bytes:
        """An upstream answer read whole, within `max_response_bytes` and the memory budget."""
        limit = self.limits.max_response_bytes
        if upstream.content_length is not None and upstream.content_length > limit:
            raise TooLarge(f"the upstream's answer of {upstream.content_length} bytes is over "
                           f"max_response_bytes = {limit}")
        if upstream.content_length is not None:  # bounded by its length: taken from the budget at once
            try:
                if not holding.take(upstream.content_length):
                    raise TooLarge(f"the proxy holds max_inflight_bytes = {self.limits.max_inflight_bytes} of "
                                   f"requests in flight; retry shortly", status=503)
                return await upstream.read()
            finally:
                if release:
                    holding.release()
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in upstream.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise TooLarge(f"the upstream's answer is over max_response_bytes = {limit}")
                if not holding.take(len(chunk)):
                    raise TooLarge(f"the proxy holds max_inflight_bytes = {self.limits.max_inflight_bytes} of "
                                   f"requests in flight; retry shortly", status=503)
                chunks.append(chunk)
        finally:
            if release:
                holding.release()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    # -- relay: one request upstream, its answer back ---------------------------------------
    async def relay(self, route: HttpRoute, request: web.Request, body: bytes, session: Session | None, *,
                    kept: bool = True, holding: Holding, headers: dict[str, str] | None = None,
                    rewritten: Send | None = None, trace: dict[str, str] | None = None) -> web.StreamResponse:
        """``request`` upstream with its own end-to-end headers (``headers``: those already made for
        it), never another request's: a GET's `Last-Event-ID` and `Accept` are the GET's, whatever the
        session's last POST carried."""
        assert self.client is not None
        if headers is None:
            headers = self._upstream_headers(route, request)
        if rewritten is not None or trace:
            headers = dict(headers)  # the session's copy stays as the host sent it
            if rewritten is not None:
                _mirror_mcp_headers(headers, rewritten)
            if trace:  # the proxy's span is the parent of what the upstream does with a rewritten request
                for name in [k for k in headers if k.lower() in trace]:
                    del headers[name]
                headers.update(trace)
        url = route.upstream_url(request.path, request.query_string)
        try:
            async with asyncio.timeout(self.upstream_timeout):  # no extra task per request, as wait_for makes
                upstream = await self.client.request(request.method, url, data=body if body else None,
                                                     headers=headers, allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            route.recorder.log("upstream_error", why=route.shown(_cause(exc)), url=redact(url))
            if session is not None and (not kept or session.provisional):
                route.sessions.forget(session.id, session)  # type: ignore[arg-type]
                session.close("the upstream could not be reached")
            msg_id = _request_id(body)
            if msg_id is not None:
                return web.json_response(_upstream_error(route, msg_id, exc))
            return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: upstream "
                                                 f"{redact(url)}: {route.shown(_cause(exc))}\n")
        adopted = kept
        async with upstream:
            if session is not None:
                adopted = route.confirm(session, upstream) if kept else route.adopt(session, request, upstream)
                route.live.add(session)
            ctype = upstream.headers.get("content-type", "")
            try:
                if "text/event-stream" in ctype:
                    return await self._relay_sse(route, request, upstream, session, body)
                if session is not None and "json" in ctype and upstream.headers.get("content-length") is None:
                    return await self._relay_json_stream(route, request, upstream, session, body)
                if session is not None and "json" in ctype:
                    try:
                        data = await self._read_answer(upstream, holding)
                    except (aiohttp.ClientError, asyncio.TimeoutError, TooLarge) as exc:  # died, or too big
                        route.recorder.log("upstream_error", why=route.shown(_cause(exc)), url=redact(url))
                        busy = isinstance(exc, TooLarge) and exc.status == 503  # the memory budget, not the upstream
                        retry = {"Retry-After": "1"} if busy else None
                        msg_id = _request_id(body)
                        if msg_id is None:
                            return web.Response(status=503 if busy else 502, headers=retry,
                                                text=f"reminder-bridge: route {route.name!r}: upstream "
                                                     f"{redact(url)}: {route.shown(_cause(exc))}\n")
                        return web.json_response(_upstream_error(route, msg_id, exc), status=503 if busy else 200,
                                                 headers=retry)
                    answer, extras = await self._json_answer(route, request, session, data)
                    return await self._answer(session, request, upstream.status, answer, _response_headers(upstream),
                                              extras)
                return await _stream_raw(request, upstream)
            finally:
                route.live.discard(session)
                if session is not None:
                    route.learn(session.flow)
                    route.remember(session)
                    if not adopted:
                        session.close("the request ended before the held reminders could be delivered "
                                      "(no session to deliver them to later)")

    async def _through_peer(self, route: HttpRoute, request: web.Request, session: Session,
                            data: bytes) -> list[Command]:
        """One upstream frame through the session's flow; the proxy's own follow-ups (an inject once
        the answer names the task) go upstream on their own; the rest is for the host."""
        commands = await _settled(session.flow, data, PEER)
        if route.shared is not None:  # a handshake answer this frame settled is recorded before it goes on
            await route.record_before_answer(session)
        if len(commands) == 1 and type(commands[0]) is Forward:
            return commands
        host: list[Command] = []
        for command in await session.driver.settle(commands):
            if type(command) is Call:
                self._spawn(self._call_and_push(route, session, command))  # type: ignore[arg-type]
            elif command.to == PEER:  # type: ignore[union-attr]
                self._spawn(self._post(route, session, command.data))  # type: ignore[union-attr]
            else:
                host.append(command)
        return host

    async def _json_answer(self, route: HttpRoute, request: web.Request, session: Session,
                           data: bytes) -> tuple[Command, list[Command]]:
        """A JSON answer through the flow: (the answer, what the flow adds before it), as the write
        commands the flow gave (what they deliver is reported once written)."""
        if not data.strip():
            return Forward(HOST, data), []
        host = await self._through_peer(route, request, session, data)
        answer = next((c for c in reversed(host) if type(c) is Forward or getattr(c, "answers", False)), None)
        extras = [c for c in host if c is not answer]
        if answer is None:  # the flow kept the answer back (nothing to relay): the extras are all there is
            return (extras[-1], extras[:-1]) if extras else (Forward(HOST, b""), [])
        return answer, extras

    async def _answer(self, session: Session | None, request: web.Request, status: int, answer: Command,
                      headers: dict[str, str], extras: list[Command] | None = None) -> web.StreamResponse:
        """One JSON answer to the host. Messages its session holds, and what the flow added before the
        answer, go first, as SSE when the host takes it (a JSON body carries one message).  An answer
        that delivers something (an outbox event) is written here, so it can be reported written."""
        data = answer.data  # type: ignore[union-attr]
        waiting = session.take_waiting() if session is not None and session.waiting else []
        before = waiting + (extras or [])
        sent = [answer]
        if before and "text/event-stream" in request.headers.get("Accept", ""):
            headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-length")}
            headers["Content-Type"] = "text/event-stream"
            data = b"".join(message_event(c.data) for c in before) + (  # type: ignore[union-attr]
                message_event(data) if data.strip() else b"")
            sent += before
        elif before and session is not None:
            session.hold(waiting)  # the session's own wait for a stream
            session.flow.unwritten(receipts_of(extras or []))
        response = web.Response(status=status, body=data, headers=headers)
        if session is not None and receipts_of(sent):
            await response.prepare(request)
            await response.write_eof()
            _written(session, sent)
        return response

    async def _reply(self, host: list[Command], request: web.Request, session: Session | None) -> web.StreamResponse:
        """The proxy answers the host itself (an invalid reminder, a queued inject, a refusal)."""
        reply = next((c for c in reversed(host) if type(c) is Reply), None)
        if reply is None and not host:
            return web.Response(status=202)
        answer = reply if reply is not None else host[-1]
        extras = [c for c in host if c is not answer]
        headers = {"Content-Type": "application/json"}
        if reply is not None and reply.retry_after_ms is not None:
            headers["Retry-After"] = str(max(1, math.ceil(reply.retry_after_ms / 1000)))
        return await self._answer(session, request, 200, answer, headers, extras)

    async def _relay_sse(self, route: HttpRoute, request: web.Request, upstream: aiohttp.ClientResponse,
                         session: Session | None, body: bytes) -> web.StreamResponse:
        """Relay an SSE stream event by event, as the upstream sends them: never buffered.

        An upstream that goes away mid-stream, or sends an event over `max_event_bytes`, ends the
        stream cleanly; if the host's request has not been answered on it yet, a JSON-RPC error
        event answers it first (spec §8.3)."""
        response = _Relayed(status=upstream.status, headers=_response_headers(upstream))
        first = await _start_relay(request, upstream, response)
        stream = _Stream(response)
        if session is not None:
            await self._write_messages(session, response, session.take_waiting())
            if request.method == "GET":
                session.streams.insert(0, stream)  # the session's own stream is where pushes go first
            else:
                session.streams.append(stream)
        last: Event | None = None
        failure: BaseException | None = None
        splitter = SseSplitter(self.limits.max_event_bytes)
        try:
            if first:
                last = await self._sse_events(route, request, splitter.feed(first), session, response)
            async for chunk in upstream.content.iter_any():
                last = await self._sse_events(route, request, splitter.feed(chunk), session, response) or last
            last = await self._sse_events(route, request, splitter.close(), session, response) or last
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
        if failure is not None:
            route.recorder.log("upstream_error", why=route.shown(_cause(failure)), url=redact(str(upstream.url)),
                               during="stream")
            msg_id = _request_id(body)
            if msg_id is not None and not (last is not None and last.data is not None and _answers(last.data, msg_id)):
                await response.write(message_event(dumps(_upstream_error(route, msg_id, failure))))
            elif isinstance(failure, EventTooLarge):
                await response.write(f": reminder-bridge: stream ended: {failure}\n\n".encode())
        await response.write_eof()
        return response

    async def _sse_events(self, route: HttpRoute, request: web.Request, batch: list[Event], session: Session | None,
                          response: web.StreamResponse) -> Event | None:
        """The events of one upstream read, each through the pipeline, to the host in one write: none
        waits for a later read, and a burst costs one write, not one per event. Returns the last
        event written."""
        out: list[bytes] = []
        delivered: list[Command] = []  # what the flow rewrote into them, reported once written
        last = None
        for event in batch:
            data = await self._sse_event(route, request, event, session, delivered)
            if data:
                out.append(data)
                last = event
        if out:
            await response.write(out[0] if len(out) == 1 else b"".join(out))
            if session is not None and delivered:
                _written(session, delivered)
        return last

    async def _sse_event(self, route: HttpRoute, request: web.Request, event: Event, session: Session | None,
                         delivered: list[Command]) -> bytes:
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
        host = await self._through_peer(route, request, session, event.data)
        if len(host) == 1 and type(host[0]) is Forward:
            return event.raw
        delivered += host
        return b"".join(event.with_data(c.data, keep_id=i == len(host) - 1)  # type: ignore[union-attr]
                        for i, c in enumerate(host))

    async def _relay_json_stream(self, route: HttpRoute, request: web.Request, upstream: aiohttp.ClientResponse,
                                 session: Session, body: bytes) -> web.StreamResponse:
        """A JSON answer the upstream streams (no Content-Length), e.g. newline-delimited messages on a
        stream that stays open (a `subscriptions/listen` answered as JSON lines): each line that is a
        whole message goes through the pipeline and on to the host at once, never held until the upstream
        closes. A body that is not one message a line (pretty-printed JSON) is read to its end as before,
        within `max_response_bytes`."""
        limit = self.limits.max_response_bytes
        response = web.StreamResponse(status=upstream.status, headers=_response_headers(upstream))
        await response.prepare(request)
        pending = bytearray()  # an unfinished line; once a line alone was no JSON, the rest of the body
        scanned = 0  # how much of `pending` holds no newline
        whole = False
        async for chunk in upstream.content.iter_any():
            pending += chunk
            if len(pending) > limit:
                route.recorder.log("upstream_error", why=f"a streamed JSON answer over max_response_bytes = {limit}",
                                   url=redact(str(upstream.url)))
                msg_id = _request_id(body)
                if msg_id is not None:
                    await response.write(dumps(_upstream_error(route, msg_id, TooLarge(
                        f"the upstream's answer is over max_response_bytes = {limit}"))))
                await response.write_eof()
                return response
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
                answer, extras = await self._json_answer(route, request, session, line)
                for extra in extras:
                    await response.write(extra.data + b"\n")  # type: ignore[union-attr]
                data = answer.data  # type: ignore[union-attr]
                await response.write(data if data is line else data + b"\n")
                _written(session, [*extras, answer])
            scanned = len(pending)
        if pending:
            answer, extras = await self._json_answer(route, request, session, bytes(pending))
            for extra in extras:
                await response.write(extra.data + b"\n")  # type: ignore[union-attr]
            await response.write(answer.data)  # type: ignore[union-attr]
            _written(session, [*extras, answer])
        await response.write_eof()
        return response

    # -- A2A agent card -------------------------------------------------------------------------
    async def agent_card(self, route: HttpRoute, request: web.Request, holding: Holding) -> web.StreamResponse:
        assert self.client is not None
        url = route.upstream_url(request.path, request.query_string)
        headers = self._upstream_headers(route, request)
        etag_asked = None
        for name in [k for k in headers if k.lower() == "if-none-match"]:
            etag_asked = headers.pop(name)  # the caller holds the proxy's ETag, not the upstream's
        try:
            async with self.client.get(url, headers=headers) as upstream:
                data = await self._read_answer(upstream, holding)
                headers = _response_headers(upstream)
                status = upstream.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, TooLarge) as exc:
            return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: upstream "
                                                 f"{redact(url)}: {route.shown(_cause(exc))}\n")
        flow = route.new_flow()  # the card is read afresh: what it declares seeds later requests
        try:
            card = json.loads(data)
        except (ValueError, RecursionError):
            return web.Response(status=status, body=data, headers=headers)
        rewritten = flow.rewrite_card(card, lambda u: route.to_proxy(u, request))  # type: ignore[attr-defined]
        route.learn(flow)
        if rewritten is None or status != 200:
            return web.Response(status=status, body=data, headers=headers)
        body = dumps(rewritten)
        # a different body: the upstream's validators no longer name it; the proxy's own ETag does
        for name in [k for k in headers if k.lower() in ("etag", "content-md5", "digest", "content-digest")]:
            del headers[name]
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        headers["ETag"] = etag
        if etag_asked is not None and etag in (t.strip() for t in etag_asked.split(",")):
            return web.Response(status=304, headers={k: v for k, v in headers.items()
                                                     if k.lower() not in ("content-type", "content-length")})
        return web.Response(status=status, body=body, headers=headers)

    # -- WebSocket -----------------------------------------------------------------------------
    async def websocket(self, route: HttpRoute, request: web.Request) -> web.StreamResponse:
        """JSON-RPC text frames, rewritten exactly as on stdio; close codes mirrored. The upgrade
        carries the same end-to-end headers upstream as an HTTP request does."""
        host = web.WebSocketResponse(protocols=_subprotocols(request), max_msg_size=64 * 1024 * 1024,
                                     autoping=True)
        await host.prepare(request)
        url = route.upstream_url(request.path, request.query_string)
        extra = self._upstream_headers(route, request, websocket=True)
        user_agent = next((extra.pop(k) for k in list(extra) if k.lower() == "user-agent"), None)
        try:
            peer = await websockets.connect(url, subprotocols=_subprotocols(request) or None,
                                            additional_headers=extra, user_agent_header=user_agent,
                                            max_size=64 * 1024 * 1024, open_timeout=10)
        except (OSError, websockets.WebSocketException, asyncio.TimeoutError) as exc:
            reason = f"upstream {redact(url)}: {route.shown(_cause(exc))}"
            route.recorder.log("upstream_error", why=reason)
            await host.close(code=1011, message=reason.encode()[:120])
            return host
        flow = route.new_flow()
        outgoing: asyncio.Queue[Command | None] = asyncio.Queue()

        def write(command: Command) -> None:
            outgoing.put_nowait(command)

        session = route.open_session(flow)
        session.driver = FlowDriver(flow, write, write)  # the proxy's own calls go to the agent like any frame
        route.live.add(session)

        async def sender() -> None:
            while (command := await outgoing.get()) is not None:
                if command.to == PEER:  # type: ignore[union-attr]
                    await peer.send(command.data.decode())  # type: ignore[union-attr]
                else:
                    await host.send_str(command.data.decode())  # type: ignore[union-attr]
                    _written(session, [command])

        async def host_to_peer() -> None:
            async for msg in host:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    session.driver.perform(_through(flow, msg.data.encode(), HOST))
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    await peer.send(msg.data)
            await outgoing.join()
            await peer.close(code=host.close_code or 1000, reason="")

        async def peer_to_host() -> None:
            try:
                async for message in peer:
                    if isinstance(message, str):
                        session.driver.perform(_through(flow, message.encode(), PEER))
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


def _written(session: Session, messages: list[Command]) -> None:
    """``messages`` are on the host's connection: what they deliver counts as delivered now."""
    receipts = receipts_of(messages)
    if receipts:
        session.driver.perform(session.flow.written(receipts))


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


@dataclass(eq=False)
class _Stream:
    """An SSE answer open to a session's host, which pushes may use until it ends."""

    response: web.StreamResponse
    task_done: bool = False


# -- helpers -------------------------------------------------------------------------------------
def _request_id(body: bytes) -> Any:
    """The id of the JSON-RPC request ``body``, read off its bytes (for error answers only: the
    flow did not need to parse a request it passed)."""
    if not body:
        return None
    kind, token = classify(body)
    if kind == "request" and token is not None:
        return json.loads(token)
    if kind == "slow" and len(body) <= 1 << 20:
        try:
            msg = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return msg.get("id") if isinstance(msg, dict) and "method" in msg else None
    return None


def _answers(data: bytes, msg_id: Any) -> bool:
    """Whether ``data`` is the response to the request ``msg_id`` (read off its bytes)."""
    kind, token = classify(data)
    return kind == "response" and token is not None and json.loads(token) == msg_id


def _response_headers(upstream: aiohttp.ClientResponse) -> dict[str, str]:
    return end_to_end(upstream.headers, HOP_BY_HOP)


def _mirror_mcp_headers(headers: dict[str, str], sent: Send) -> None:
    """MCP 2026-07-28 mirrors the method (and tool/resource name) in headers: keep them true to
    the message the flow rewrote (it says which)."""
    names = {k.lower(): k for k in headers}
    if "mcp-method" in names and sent.method is not None:
        headers[names["mcp-method"]] = sent.method
        if "mcp-name" in names and sent.name is not None:
            headers[names["mcp-name"]] = sent.name


def _subprotocols(request: web.Request) -> list[str]:
    value = request.headers.get("Sec-WebSocket-Protocol", "")
    return [p.strip() for p in value.split(",") if p.strip()]


class _Relayed(web.StreamResponse):
    """A streamed answer whose headers leave with its first bytes, in one write instead of two
    (aiohttp ≥ 3.10 holds them when asked; an older one sends them at `prepare`, as before)."""

    _send_headers_immediately = False


async def _start_relay(request: web.Request, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> bytes:
    """Prepare ``response`` and return what of the upstream's body has already arrived. With
    nothing yet, the headers leave now: a host waits for them (an idle GET stream must open)."""
    await response.prepare(request)
    first = upstream.content.read_nowait()
    if not first:
        await response.write(b"")
    return first


async def _stream_raw(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """Anything the pipeline need not read (GET, DELETE, 202s, 405s, binary bodies): bytes as they come."""
    response = _Relayed(status=upstream.status, headers=_response_headers(upstream))
    if upstream.headers.get("content-length") is not None and "text/event-stream" not in upstream.headers.get(
            "content-type", ""):
        response.content_length = int(upstream.headers["content-length"])
    first = await _start_relay(request, upstream, response)
    if first:
        await response.write(first)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response


def _cause(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        exc = exc.os_error
    if isinstance(exc, OSError) and exc.errno:
        return f"cannot connect ({os.strerror(exc.errno)})"
    return str(exc) or type(exc).__name__


def _through(flow: Flow, data: bytes, origin: str, headers: Any = None) -> Outcome:
    return flow.from_host(data, headers=headers) if origin == HOST else flow.from_peer(data)


async def _settled(flow: Flow, data: bytes, origin: str, headers: Any = None) -> list[Command]:
    """`_through`, awaited when the flow waits on shared state."""
    outcome = _through(flow, data, origin, headers)
    return outcome if type(outcome) is list else await outcome  # type: ignore[misc]


def _upstream_error(route: HttpRoute, msg_id: Any, exc: BaseException) -> dict[str, Any]:
    cause = route.shown(_cause(exc))
    return error_response(msg_id, UPSTREAM_ERROR, f"reminder-bridge route {route.name!r}: upstream "
                                                  f"{route.target.shown} {cause}",
                          {"route": route.name, "upstream": route.target.shown, "cause": cause})
