"""An HTTP host in front of a stdio MCP server: a route with a `command` (`serve --upstream-command`).

The proxy is the Streamable HTTP server here: it issues the `Mcp-Session-Id` at the host's
`initialize` and starts the session's child then (one child per session by default; with
`command_mode = "shared"` one child for the route, ids rewritten per session by
`bridge.transports.multiplex`).  Every frame goes through the session's flow, as on any route;
the child's lines come from the stdio transport's `Framer`, and what it leaves unanswered when it
dies or its line is too long is answered by the flow (`upstream_gone`, `oversize`).

Where the child's frames go: an answer to the POST that asked (its JSON body, or SSE once
anything else came first); anything else to the oldest POST still streaming (a stdio server
speaks during the call it is making), else to the session's GET stream, else ahead of the
session's next answer.  What waits for a host is bounded in bytes (`max_response_bytes` per
session): past it, a session's own child is not read until its host catches up, and a shared
child's session that does not read is ended (it would hold every other session up).
"""
from __future__ import annotations

import asyncio
import os
import re
import secrets
from collections import deque
from typing import Any

from aiohttp import web

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.jsonrpc import dumps, error_response, ids_in, loads
from bridge.pipeline.commands import HOST, PEER, Call, Command, Send, Write, receipts_of
from bridge.pipeline.eras import BRIDGES, EraLayer, session_key
from bridge.pipeline.flow import Flow
from bridge.pipeline.inflight import token_key
from bridge.state.scope import Scope
from bridge.transports.driver import FlowDriver
from bridge.transports.http.children import Child, Children, Full
from bridge.transports.http.own_calls import OwnCalls, settled, written
from bridge.transports.http.routes import MODERN_VERSION, SESSION_HEADER, HttpRoute
from bridge.transports.http.sse_streams import OpenStream
from bridge.transports.http.upstream_errors import UPSTREAM_ERROR
from bridge.transports.multiplex import SharedIds
from bridge.transports.sessions import Session
from bridge.transports.sse import message_event
from bridge.transports.stdio import MAX_LINE

#: What a host gets for a session the proxy does not hold (MCP: 404, and the host starts anew).
SESSION_GONE = -32001
#: Requests whose POST is gone (the host left) remembered per session, so their late answers are dropped
ABANDONED_LIMIT = 10_000
#: A request that starts a session (no child is started for anything else).
INITIALIZE = re.compile(rb'"method"\s*:\s*"initialize"')


class Exchange:
    """One POST waiting for the answers to its requests (by id key), and what the child says meanwhile."""

    def __init__(self, keys: list[Any], sse: bool):
        self.want = set(keys)
        self.sse = sse
        self.items: deque[Write] = deque()
        self.arrived = asyncio.Event()
        self.over = False

    def finish(self) -> None:
        self.over = True
        self.arrived.set()

    @property
    def complete(self) -> bool:
        return self.over or not self.want


class ChildSession(Session):
    """A session of a command route: its flow, the child it talks to, the POSTs waiting for answers."""

    def __init__(self, upstream: CommandUpstream, flow: Flow):
        super().__init__(flow, upstream.route.settings.trust.max_pending_per_session)
        self.upstream = upstream
        self.link: Link = None  # type: ignore[assignment]  # set once its child is chosen
        self.exchanges: dict[Any, Exchange | None] = {}  # id key → its POST (None: the POST is gone)
        self.open: list[Exchange] = []
        self.pushes: deque[Write] = deque()  # for the GET stream
        self.pushed = asyncio.Event()
        self.queued = 0  # bytes waiting for the host, in every queue of the session
        self.ended = asyncio.Event()
        self.held_up = False

    # -- from the child --------------------------------------------------------------------------
    def from_child(self, frame: bytes) -> None:
        self.perform(self.driver.resolve(self.flow.from_peer(frame)))

    def perform(self, commands: list[Command]) -> None:
        later = []
        for command in commands:
            if isinstance(command, Write):
                self.write(command)
            else:
                later.append(command)
        if later:
            self.driver.perform(later)

    def write(self, command: Write) -> None:
        """Where one of the flow's writes goes: the child, or the host (see the module's docstring)."""
        if command.to == PEER or isinstance(command, Call):
            self.link.write(command.data)
            return
        if type(command) is Send and command.stream is not None:  # 2026-07-28: another request's listen stream
            self.upstream.proxy.to_listen(self.upstream.route, self, [command])
            return
        key = getattr(command, "answers", None)
        if key is None and self.exchanges:  # a response the flow passed on after decoding it says no more
            key = _answered(command.data)
        if key is not None and key in self.exchanges:
            exchange = self.exchanges.pop(key)
            if exchange is None:
                return  # the host gave up on it: an answer on another stream would be a stray
            exchange.want.discard(key)
            self._queue(exchange.items, command, exchange.arrived)
            return
        exchange = next((e for e in self.open if e.sse and not e.complete), None)
        if exchange is not None:
            self._queue(exchange.items, command, exchange.arrived)
        elif any(not s.task_done for s in self.streams):
            self._queue(self.pushes, command, self.pushed)
        else:
            self.hold([command])

    def _queue(self, queue: deque[Write], command: Write, arrived: asyncio.Event) -> None:
        queue.append(command)
        arrived.set()
        self.queued += len(command.data)
        if self.queued > self.upstream.queue_bytes and not self.held_up:
            self.held_up = True
            self.link.over(self)

    def taken(self, messages: list[Write]) -> None:
        """``messages`` left a queue for the host's connection."""
        self.queued -= sum(len(m.data) for m in messages)
        if self.held_up and self.queued <= self.upstream.queue_bytes // 2:
            self.held_up = False
            self.link.under(self)

    def hold(self, messages: list[Write]) -> None:
        """`Session.hold`, and bounded in bytes too: the oldest go first."""
        super().hold(messages)
        total = sum(len(m.data) for m in self.waiting)
        while len(self.waiting) > 1 and total > self.upstream.queue_bytes:
            oldest = self.waiting.pop(0)
            total -= len(oldest.data)
            self.dropped += 1
            self.flow.unwritten(receipts_of([oldest]))

    def gone(self, error: dict[str, Any], frame: bytes | None = None) -> None:
        """The child can answer nothing more (of ``frame``: its requests): each gets ``error``."""
        self.perform(list(self.flow.upstream_gone(error, frame)))

    def close(self, why: str) -> None:
        if self.ended.is_set():
            return
        self.ended.set()
        for exchange in self.open:
            exchange.finish()
        self.pushed.set()
        super().close(why)
        if self.link is not None:
            self.link.leave(self)


class Link:
    """How a session's frames reach its child: its own child (the default)."""

    def __init__(self, child: Child):
        self.child = child

    def write(self, data: bytes) -> None:
        self.child.write(_line(data))

    def pause(self, session: ChildSession, on: bool) -> None:
        """The flow's backlog behind shared state is long (or short again): the child waits (or not)."""
        self.child.hold(session, on)

    def over(self, session: ChildSession) -> None:
        self.child.hold(session, True)

    def under(self, session: ChildSession) -> None:
        self.child.hold(session, False)

    def leave(self, session: ChildSession) -> None:
        self.child.stop()


class SharedLink(Link):
    """A session's place on the route's shared child: its tag in the child's `SharedIds`."""

    def __init__(self, shared: Shared, session: ChildSession):
        super().__init__(shared.child)
        self.shared = shared
        self.tag = shared.ids.join()
        shared.sessions[self.tag] = session

    def write(self, data: bytes) -> None:
        out = self.shared.ids.outbound(self.tag, _line(data)[:-1])
        if out is not None:
            self.child.write(out + b"\n")

    def over(self, session: ChildSession) -> None:  # one host never holds up the others
        session.upstream.end(session, "its host does not read what the shared server sends")

    def under(self, session: ChildSession) -> None:
        pass

    def leave(self, session: ChildSession) -> None:
        """A 2026-07-28 host ends a listen by closing its stream: the child is told as stdio tells it."""
        cancel = session.flow.listen_cancel()
        if cancel is not None:
            self.write(cancel)
        self.shared.ids.leave(self.tag)
        self.shared.sessions.pop(self.tag, None)
        self.shared.used = asyncio.get_running_loop().time()


class Shared:
    """A shared child, and its sessions by tag: the route's one in shared mode (``key`` ""), or,
    where the era bridge speaks for 2026-07-28 hosts, one per client capability set and client
    info (`CommandUpstream.shared_key`)."""

    def __init__(self, upstream: CommandUpstream, key: str = ""):
        self.upstream = upstream
        self.key = key
        self.child = upstream.new_child(self.lines, self.oversize, self.gone)
        self.ids = SharedIds()
        self.sessions: dict[int, ChildSession] = {}
        self.used = asyncio.get_running_loop().time()  # when its last session ended: idle expiry

    def lines(self, block: bytes) -> None:
        for frame in _frames(block):
            for tag, data in self.ids.inbound(frame):
                session = self.sessions.get(tag)
                if session is not None:
                    session.from_child(data)

    def oversize(self, head: bytes) -> None:
        found = self.ids.unwrap_head(head)
        session = self.sessions.get(found[0]) if found is not None else None
        if session is not None:
            session.perform(list(session.flow.oversize(found[1], PEER, self.upstream.max_line)))

    def gone(self, error: dict[str, Any]) -> None:
        for session in list(self.sessions.values()):
            session.gone(error)
            self.upstream.end(session, "the shared stdio server ended")
        if self.upstream.shared.get(self.key) is self:
            del self.upstream.shared[self.key]


class CommandUpstream:
    """A route's stdio upstream: its children (bounded), the shared one, how they are started."""

    def __init__(self, route: HttpRoute, proxy: OwnCalls, command: list[str], mode: str, max_children: int):
        self.route, self.proxy = route, proxy
        self.command, self.mode = command, mode
        self.server = f"the stdio server {command[0]!r}"  # as errors name it
        self.children = Children(max_children)
        self.shared: dict[str, Shared] = {}  # by `shared_key`
        self._starting = asyncio.Lock()
        #: what may wait for one session's host, in bytes
        self.queue_bytes = proxy.limits.max_response_bytes
        self.max_line = min(MAX_LINE, proxy.limits.max_response_bytes)

    def new_child(self, lines: Any, oversize: Any, gone: Any, flow: Flow | None = None) -> Child:
        """A child for ``flow``'s session (None: the shared one)."""
        return Child(self.command, lines, oversize, gone, self.max_line, self.bridge(flow))

    def bridge(self, flow: Flow | None) -> EraLayer | None:
        """The era bridge in front of a child, on a route that names its server's era: every child
        of a 2025-11-25 server (the shared ones speak for the 2026-07-28 hosts, which all use
        them); a 2026-07-28 server's own children, each its 2025-11-25 session's (its hosts need
        none)."""
        settings = self.route.settings
        era = settings.bridged_server_era
        if not era or (flow is None and era == MODERN_ERA):
            return None
        settled = (lambda: MODERN_ERA) if flow is None else (lambda: flow.state.era)
        return BRIDGES[era](settings.host_era, settled, self.route.recorder, streams=True,
                            input_wait_s=settings.input_wait_s)

    def shared_key(self, body: bytes) -> str:
        """The shared child a 2026-07-28 request goes to: where the era bridge speaks for it to a
        2025-11-25 server, the one whose session its client capabilities and client info opened
        (a session holds one set; a message that names neither goes to the newest); else the
        route's one."""
        if self.route.settings.bridged_server_era != LEGACY_ERA:
            return ""
        try:
            key = session_key(loads(body))
        except ValueError:
            key = None
        return key if key is not None else next(reversed(self.shared), "[null, null]")

    def expire(self, idle_s: float) -> None:
        """The shared children the era bridge opened a 2025-11-25 session on end once no host used
        them for ``idle_s`` seconds (`--session-idle`); the route's one shared child stays."""
        now = asyncio.get_running_loop().time()
        for key, shared in list(self.shared.items()):
            if key and not shared.sessions and now - shared.used > idle_s:
                del self.shared[key]
                shared.child.stop()
                self.route.recorder.info("child_stopping", pid=shared.child.pid, why=f"no host used its session "
                                         f"for {idle_s:g} s (--session-idle)")

    async def open(self, flow: Flow, shared: bool, key: str = "") -> ChildSession:
        """A session on a child: its own (started now), or a shared one (``key``'s, started once)."""
        session = ChildSession(self, flow)
        # ready before the child starts: what it says at once (a log line at its start) meets a whole session
        session.driver = FlowDriver(flow, session.write, session.write, lambda on: session.link.pause(session, on))
        settings = self.route.settings  # as reloaded: a new child starts in the `env` and `cwd` of now
        env, cwd = ({**os.environ, **settings.env} if settings.env else None), settings.cwd
        try:
            if shared:
                async with self._starting:  # sessions that start together share the one child
                    one = self.shared.get(key)
                    if one is None or not one.child.alive:
                        one = Shared(self, key)
                        await self.children.start(one.child, env, cwd)
                        self.shared[key] = one
                        self._started(one.child)
                session.link = SharedLink(one, session)
            else:
                child = self.new_child(lambda block: _each(block, session.from_child),
                                       lambda head: session.perform(list(flow.oversize(head, PEER, self.max_line))),
                                       lambda error: self.lost(session, error), flow)
                session.link = Link(child)
                await self.children.start(child, env, cwd)
                self._started(child)
        except (Full, OSError):
            session.link = None  # type: ignore[assignment]  # nothing to leave
            session.close("its stdio server could not start")
            raise
        self.route.recorder.track(session)
        return session

    async def keeper(self, scope: Scope, key: str) -> ChildSession | None:
        """The keeper of ``scope``'s 2026-07-28 requests (`HttpRoute.keeps`), on the shared child
        ``key`` names (they share it): the route's, else one made now; None if none can start."""
        route, name = self.route, scope.key("keeper")
        if not route.keeps(scope):
            return None
        found = route.keepers.get(name)
        if found is None or found.ended.is_set():  # (its shared child ended, and it with it)
            try:
                made = await self.open(route.keeper_flow(scope), shared=True, key=key)
            except (Full, OSError):
                return None
            found = route.keepers.get(name)
            if found is None or found.ended.is_set():
                route.keepers.put(name, made)
                return made
            made.close("another request of its scope made its keeper meanwhile")
        return found

    def _started(self, child: Child) -> None:
        self.route.recorder.info("child_started", pid=child.pid, command=self.command[0], mode=self.mode)

    def lost(self, session: ChildSession, error: dict[str, Any]) -> None:
        """A session's own child ended: its requests are answered, the session ends with it."""
        session.gone(error)
        self.end(session, "its stdio server ended")

    def end(self, session: ChildSession, why: str) -> None:
        if session.id is not None and self.route.sessions.get(session.id) is session:
            self.route.sessions.close(session.id)
        session.close(why)

    async def stop(self) -> None:
        """Shutdown: every session ends, every child is stopped and reaped (SIGTERM, then SIGKILL)."""
        for session in list(self.route.sessions):
            session.close("the proxy is stopping")
        await self.children.stop_all()


async def handle(proxy: OwnCalls, route: HttpRoute, request: web.Request, body: bytes) -> web.StreamResponse:
    """A request to a command route: POST (JSON-RPC), GET (the session's stream), DELETE (its end)."""
    upstream: CommandUpstream = route.stdio
    session_id = request.headers.get(SESSION_HEADER)
    session = route.sessions.get(session_id) if session_id else None
    answered = await outside_post(proxy, route, request, body, session)
    if answered is not None:
        return answered
    if session is None:
        try:
            modern = request.headers.get("mcp-protocol-version") == MODERN_VERSION
            session = await _start(upstream, route, request, body, stateless=modern)
        except Full as exc:
            route.recorder.warning("children_full", limit=upstream.children.limit, why=str(exc))
            return _refusal(503, UPSTREAM_ERROR, f"reminder-bridge route {route.name!r}: {exc}; try again later",
                            {"route": route.name, "max_children": upstream.children.limit}, retry=True)
        except OSError as exc:
            why = exc.strerror or str(exc)
            route.recorder.log("upstream_error", why=why, command=upstream.command[0])
            return _refusal(502, UPSTREAM_ERROR, f"reminder-bridge route {route.name!r}: cannot start "
                                                 f"{upstream.command[0]!r}: {why}", {"route": route.name})
    try:
        return await post(proxy, session, request, body)
    finally:
        if session.id is None:  # a request that is its own session (2026-07-28): nothing outlives it
            session.close("the request was answered")


async def outside_post(proxy: OwnCalls, route: HttpRoute, request: web.Request, body: bytes,
                       session: ChildSession | None) -> web.StreamResponse | None:
    """What a request gets when the proxy is the host's Streamable HTTP server and the request is
    not a JSON-RPC POST it goes on with (None: it is one): 404 for a session the route does not hold,
    a DELETE ends the session, a GET is its stream, anything else is 405, and a 2025-11-25 POST
    without a session that is not an `initialize` is 400 (MCP: a session starts there, and only there)."""
    if request.headers.get(SESSION_HEADER) and session is None:
        return _refusal(404, SESSION_GONE, "Session not found: it ended, or the proxy restarted; initialize anew")
    if request.method == "DELETE":
        if session is None:
            return web.Response(status=400, text="reminder-bridge: DELETE needs an Mcp-Session-Id\n")
        route.sessions.close(session.id)
        return web.Response(status=200)
    if request.method == "GET":
        if session is None:
            return web.Response(status=405, headers={"Allow": "POST"},
                                text="reminder-bridge: a GET stream belongs to a session: initialize first\n")
        return await _stream(proxy, session, request)
    if request.method != "POST" or "json" not in request.headers.get("content-type", ""):
        return web.Response(status=405, headers={"Allow": "GET, POST, DELETE"},
                            text="reminder-bridge: POST JSON-RPC here (Content-Type: application/json)\n")
    modern = request.headers.get("mcp-protocol-version") == MODERN_VERSION
    if session is None and not modern and not INITIALIZE.search(body):
        return _refusal(400, -32600, "no Mcp-Session-Id: a session starts with initialize (reminder-bridge)")
    return None


async def _start(upstream: CommandUpstream, route: HttpRoute, request: web.Request, body: bytes,
                 stateless: bool) -> ChildSession:
    """A new session: a 2025-11-25 host's (a new id, its own child unless shared), or one request's
    (2026-07-28: a shared child, whose answer ends it)."""
    if stateless:
        scope, key = route.sessionless_scope(request), upstream.shared_key(body)
        flow = route.new_flow(scope=scope, subscriptions=route.subscriptions, owners=route.pulls, **route._seeds())
        session = await upstream.open(flow, shared=True, key=key)
        session.keeper = await upstream.keeper(scope, key)
        return session
    session_id = secrets.token_urlsafe(24)
    flow = route.new_flow(scope=Scope.mcp_session(route.name, session_id))
    session = await upstream.open(flow, shared=upstream.mode == "shared")
    session.id = session_id
    route.sessions.put(session_id, session)
    return session


async def post(proxy: OwnCalls, session: ChildSession, request: web.Request, body: bytes) -> web.StreamResponse:
    """A JSON-RPC POST of a session through its flow; its answer as the session's frames come."""
    keys = [token_key(key) for kind, key, _ in ids_in(body) if kind == "request"]
    if any(session.exchanges.get(key) is not None for key in keys):  # its answer could not tell the two apart
        return web.Response(body=dumps(error_response(None, -32600, "a request with this id is still in flight in "
                                                                   "this session (reminder-bridge)")),
                            content_type="application/json")
    exchange = Exchange(keys, "text/event-stream" in request.headers.get("Accept", ""))
    for key in keys:
        session.exchanges[key] = exchange
    session.open.append(exchange)
    headers = {"Mcp-Session-Id": session.id} if session.id else {}
    try:
        commands = await session.driver.settle(await settled(session, body, HOST, request.headers))
        await _writable(proxy, session, body)  # (the flow has noted the body's requests: a timeout answers them)
        session.perform(commands)
        if not keys:
            return web.Response(status=202, headers=headers)
        return await _answer(proxy, session, request, exchange, body, headers)
    finally:
        session.open.remove(exchange)
        for key in exchange.want:
            if key in session.exchanges:
                session.exchanges[key] = None
        if len(session.exchanges) > ABANDONED_LIMIT:  # answers a child never gives cannot grow this for ever
            for key in [k for k, e in session.exchanges.items() if e is None][:ABANDONED_LIMIT // 2]:
                del session.exchanges[key]
        session.taken(list(exchange.items))


async def _writable(proxy: OwnCalls, session: ChildSession, body: bytes) -> None:
    """Wait while the child's stdin is full (it reads slowly): what is written for it stays bounded."""
    writable = session.link.child.writable
    if not writable.is_set():
        try:
            async with asyncio.timeout(proxy.upstream_timeout):
                await writable.wait()
        except TimeoutError:
            session.gone(_timed_out(session, "to read its stdin"), body)


async def _answer(proxy: OwnCalls, session: ChildSession, request: web.Request, exchange: Exchange,
                  body: bytes, headers: dict[str, str]) -> web.StreamResponse:
    """The POST's answer: one JSON body when the answer comes first, else SSE as the child speaks."""
    try:
        async with asyncio.timeout(proxy.upstream_timeout):  # for the child to start answering
            await exchange.arrived.wait()
    except TimeoutError:
        session.gone(_timed_out(session, "to start answering"), body)
    while not exchange.sse and not exchange.complete:
        exchange.arrived.clear()
        await exchange.arrived.wait()
    subscription = session.flow.subscription()  # a 2026-07-28 listen: other requests' flows may write on it
    if not exchange.sse or (exchange.complete and len(exchange.items) == 1 and not session.waiting
                            and subscription is None):
        messages = list(exchange.items)
        exchange.items.clear()
        session.taken(messages)
        if not messages:
            return _refusal(404, SESSION_GONE, "the session ended before its answer came")
        data = messages[0].data if len(messages) == 1 else b"[" + b",".join(m.data for m in messages) + b"]"
        response = web.Response(body=data, content_type="application/json", headers=headers)
        if receipts_of(messages):
            await response.prepare(request)
            await response.write_eof()
            written(session, messages)
        return response
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    listen = session.upstream.route.listening.open(session.flow.scope, subscription, response) \
        if subscription is not None else None
    try:
        await proxy.write_messages(session, response, session.take_waiting())
        while True:
            messages = list(exchange.items)
            exchange.items.clear()
            exchange.arrived.clear()
            if messages:
                session.taken(messages)
                await response.write(b"".join(message_event(m.data) for m in messages))
                written(session, messages)
            if exchange.complete and not exchange.items:
                break
            await exchange.arrived.wait()
    finally:
        if listen is not None:
            session.upstream.route.listening.close(listen, response)
    await response.write_eof()
    return response


async def _stream(proxy: OwnCalls, session: ChildSession, request: web.Request) -> web.StreamResponse:
    """The session's GET stream: what the child says outside any call, until the session ends."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "Mcp-Session-Id": session.id or ""})
    await response.prepare(request)
    await response.write(b": reminder-bridge\n\n")
    stream = OpenStream(response)
    session.streams.insert(0, stream)
    try:
        await proxy.write_messages(session, response, session.take_waiting())
        while not session.ended.is_set():
            messages = list(session.pushes)
            session.pushes.clear()
            session.pushed.clear()
            if messages:
                session.taken(messages)
                if not await proxy.write_messages(session, response, messages):
                    break
            else:
                await session.pushed.wait()
    finally:
        stream.task_done = True
        session.streams.remove(stream)
        if session.pushes and not any(not s.task_done for s in session.streams):  # the last GET stream went:
            left = list(session.pushes)  # what it did not take waits for the next answer (and frees the child)
            session.pushes.clear()
            session.taken(left)
            if not session.ended.is_set():
                session.hold(left)
    try:
        await response.write_eof()
    except ConnectionError:  # the host left first (its DELETE ended the session)
        pass
    return response


def _timed_out(session: ChildSession, what: str) -> dict[str, Any]:
    upstream = session.upstream
    said = (f"reminder-bridge route {upstream.route.name!r}: {upstream.server} took longer "
            f"than {upstream.proxy.upstream_timeout:g} s {what}")
    return error_response(None, UPSTREAM_ERROR, said, {"route": upstream.route.name, "cause": "timed out"})["error"]


def _refusal(status: int, code: int, message: str, data: Any = None, retry: bool = False) -> web.Response:
    return web.Response(status=status, body=dumps(error_response(None, code, message, data)),
                        content_type="application/json", headers={"Retry-After": "1"} if retry else None)


def _line(data: bytes) -> bytes:
    """A frame as one line: a newline between JSON tokens is whitespace (inside a string it is escaped)."""
    return (data.replace(b"\n", b" ") if b"\n" in data else data) + b"\n"


def _answered(data: bytes) -> Any:
    """The id key of the request ``data`` answers, when it is one response (the cheap look at its id)."""
    found = [token_key(key) for kind, key, _ in ids_in(data, requests=False) if kind == "response"]
    return found[0] if len(found) == 1 else None


def _frames(block: bytes) -> list[bytes]:
    return [line for line in block.split(b"\n") if line.strip()]


def _each(block: bytes, feed: Any) -> None:
    for frame in _frames(block):
        feed(frame)
