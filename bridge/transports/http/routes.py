"""A route: where it answers, its upstream, the sessions it holds (a bounded table) and their
records in shared state (Redis), so another replica can go on with a session this one negotiated.
What a reload may change while the route runs is decided here too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp import web

from bridge.pipeline.a2a import TaskBook
from bridge.assembly import make_flow
from bridge.outbox.owners import PullOwners
from bridge.pipeline.flow import Flow
from bridge.pipeline.subscriptions import Subscriptions
from bridge.policy import Policy
from bridge.rules import Limits, RouteSettings
from bridge.state import StateUnavailable
from bridge.state.queues import ReminderQueues
from bridge.state.scope import MCP_SESSION, Scope
from bridge.telemetry import Recorder, Tracing
from bridge.transports.forwarding import Upstream, origin_allowed, with_own
from bridge.transports.http.listening import ListenStreams
from bridge.transports.sessions import Session, SessionTable

SESSION_HEADER = "mcp-session-id"
MODERN_VERSION = "2026-07-28"


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
    #: MCP 2026-07-28: what the route's sessionless requests' flows share per scope (listen streams
    #: that take reminders, reminders held for the fallback), and those streams, open
    subscriptions: Subscriptions = field(init=False)
    listening: ListenStreams = field(init=False, default_factory=ListenStreams)
    #: MCP 2026-07-28 on a route with an outbox: per identity, the session that polls its outbox
    #: for its requests (each a flow of its own, over once answered), by scope key; and the owners
    #: of those polls (`bridge.outbox.owners`), for the requests' flows to find
    keepers: SessionTable = field(init=False)
    pulls: PullOwners = field(init=False, default_factory=PullOwners)
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
    #: a route with a `command` and no `upstream`: its stdio server (`command.CommandUpstream`, set by the proxy)
    stdio: Any = field(init=False, default=None)
    #: `server_era = "2025-11-25"`: the upstream sessions opened for 2026-07-28 hosts, by what opened
    #: them (`http.eras.Legacy`, made at the first such request)
    eras: dict[str, Any] | None = field(init=False, default=None)

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
        self.subscriptions = Subscriptions(max_scopes=self.limits.max_sessions)
        self.keepers = SessionTable(self.limits.max_sessions, self.limits.session_idle_s)
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
        return [*self.sessions, *self.live, *keeper, *self.keepers]

    def flows(self) -> list[Flow]:
        """Every live pipeline of this route (a reload reconfigures them all)."""
        found = {id(s.flow): s.flow for s in self._sessions()}
        return list(found.values())

    def refusal(self, settings: RouteSettings, after: dict[str, RouteSettings]) -> tuple[str, str] | None:
        """What a reload cannot move while the route runs (`bridge.policy.reload.apply_reload`): the
        route out of `serve` (no upstream), between HTTP and WebSocket (how clients connect), across
        an era bridge (`host_era`, `server_era`), or onto a path another running route serves."""
        if self.stdio is not None:  # its children run the command they were started with
            if settings.upstream is not None or settings.command != self.settings.command:
                return "command", ("a route's stdio server changes at a restart (children run the command they "
                                   "started with)")
            if settings.command_mode != self.settings.command_mode:
                return "command_mode", "moving between one child per session and a shared child needs a restart"
        elif settings.upstream is None:
            return "upstream", "serve needs an upstream for every route it serves (a route leaves at a restart)"
        elif settings.upstream.startswith(("ws://", "wss://")) != self.is_websocket:
            return "upstream", ("moving the upstream between HTTP and WebSocket changes how clients connect; "
                                "that needs a restart")
        for key in ("host_era", "server_era"):  # what the route's sessions were bridged on (or not)
            if getattr(settings, key) != getattr(self.settings, key):
                return key, "a route's era bridge changes at a restart: its sessions were opened across it (or not)"
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
        target = upstream_of(settings.upstream, settings) if settings.upstream is not None else self.target
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
                    await self._catch_up(held, session_id)  # recorded the handshake it saw: look again
                self.remember(held, refresh=True)
                return held, True
            if request.query_string and (held := self.sessions.get("q:" + request.query_string)) is not None:
                return held, True  # 2024-11-05 HTTP+SSE: POSTs name the stream's session in the query
            if request.headers.get("mcp-protocol-version") == MODERN_VERSION:
                # a request that is its own session: its outbox is its identity's, if the rules name one
                return self.sessionless(self.sessionless_scope(request)), False
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

    def sessionless(self, scope: Scope, keeper: Session | None = None) -> Session:
        """The pipeline of a 2026-07-28 request (it has no session) of ``scope``: what outlives the
        request is the route's book's, under that scope, and its outbox is polled by the scope's
        keeper (``keeper``: the era bridge's upstream session's, else the route's, `keeper_of`)."""
        session = self.open_session(self.new_flow(scope=scope, subscriptions=self.subscriptions, owners=self.pulls,
                                                  **self._seeds()))
        session.keeper = keeper or self.keeper_of(scope)
        return session

    def keeps(self, scope: Scope) -> bool:
        """Whether the 2026-07-28 requests of ``scope`` have a keeper in `keepers`: an identity's, on
        an MCP route that polls an outbox (a request that is nobody's polls nothing)."""
        return self.protocol == "mcp" and self.settings.outbox is not None and scope.lasting

    def keeper_of(self, scope: Scope) -> Session | None:
        """The route's keeper of ``scope`` (`keeps`): made at the scope's first request, kept while its
        requests come (`session_idle_s`), at most `max_sessions` (the one idle longest ends)."""
        if not self.keeps(scope):
            return None
        key = scope.key("keeper")
        keeper = self.keepers.get(key)
        if keeper is None:
            keeper = self.keeper_session(scope)
            self.keepers.put(key, keeper)
        return keeper

    def keeper_flow(self, scope: Scope) -> Flow:
        """The pipeline of a session of ``scope`` that outlives its requests: it owns their outbox
        polls, and reads what the server sends that is no request's."""
        return self.new_flow(scope=scope, subscriptions=self.subscriptions, owners=self.pulls, keeper=True,
                             **self._seeds())

    def keeper_session(self, scope: Scope, upstream: Any = None) -> Session:
        """A keeper of ``scope``; ``upstream``: what carries its own requests (the era bridge), else
        they go to the route's upstream."""
        return self.open_session(self.keeper_flow(scope), upstream)

    def open_session(self, flow: Flow, upstream: Any = None) -> Session:
        """``upstream``: what carries the session's own messages and calls (`OwnCalls.driver_for`)."""
        session = Session(flow, self.settings.trust.max_pending_per_session)
        if self.protocol == "a2a":  # what a request holds belongs to its task: the route's keeper wakes for it
            session.driver, session.shared_driver = self._keeper().driver, True
        else:
            session.driver = self.proxy.driver_for(self, session, upstream)
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
        learned = flow.learned()
        if learned is None:
            return
        self.learned = {"peer_dialect": learned.dialect}
        if self.protocol == "mcp" and learned.declared is not None:
            self.learned["peer_declared"] = learned.declared

    def _record_key(self, session_id: str) -> str:
        """Where another replica finds what this session's handshake settled (its scope digests the id)."""
        return Scope.mcp_session(self.name, session_id).key("record")

    async def _catch_up(self, session: Session, session_id: str) -> None:
        """A session held without its handshake goes on with what another replica recorded of it."""
        record = await self._record(session_id)
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
        due = self._due_record(session, refresh)
        if due is not None:
            self.proxy.spawn(self._put_record(*due))

    async def record_before_answer(self, session: Session) -> None:
        """The record of a handshake the flow just settled, written before its answer reaches the host:
        a host that sends its next request to another replica at once finds the session there."""
        due = self._due_record(session, False)
        if due is not None:
            await self._put_record(*due)

    def _due_record(self, session: Session, refresh: bool) -> tuple[str, dict[str, Any]] | None:
        """(session id, record) when shared state should get the session's record now (it changed,
        or ``refresh`` and it is getting old), marked as written; else None."""
        if self.shared is None or session.id is None or self.proxy is None:
            return None
        record = session.flow.negotiated()
        now = session.flow.clock()
        if record is None or (record == session.recorded and
                              (not refresh or now - session.recorded_at < self.limits.session_idle_s / 4)):
            return None
        session.recorded, session.recorded_at = record, now
        return session.id, record

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
            if session.id is not None:
                self.sessions.forget(session.id, session)
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

    def upstream_url(self, request: web.Request) -> str:
        """The upstream URL of a host request: its path below the route and its query as the host
        wrote them, still percent-encoded (aiohttp's `path` and `query_string` are decoded: a `%2F`
        would become a path separator and a `%26` in a value would split the parameter)."""
        raw, _, query = request.raw_path.partition("?")
        if not raw.startswith(self.prefix or "/"):  # absolute-form, or a prefix the host encoded
            raw, query = request.path, request.query_string
        return self.target.url(self.below(raw), query)

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
