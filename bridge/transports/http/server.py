"""The proxy itself: the aiohttp application every route is served by, its start and stop, and
the dispatch that gives each request to the job it is (WebSocket, agent card, JSON-RPC, relay)."""
from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from bridge.rules import Limits
from bridge.telemetry import Recorder, register_collector
from bridge.transports.guard import Guard, Holding
from bridge.transports.http.agent_card import CARD_PATHS, agent_card
from bridge.transports.http.bodies import Refused, read_body
from bridge.transports.http.command import CommandUpstream, handle as handle_command
from bridge.transports.http.eras import bridged, close as close_eras, expire as expire_eras, takes
from bridge.transports.http.modern_eras import close as close_modern, handle as handle_modern, takes as takes_modern
from bridge.transports.http.own_calls import OwnCalls
from bridge.transports.http.relay import jsonrpc, relay
from bridge.transports.http.routes import SESSION_HEADER, HttpRoute
from bridge.transports.http.websocket import websocket

#: How often the session tables drop idle sessions (each session's own timers are its flow's).
HOUSEKEEPING = 5.0


class HttpProxy(OwnCalls):
    """Every route of `serve` on one aiohttp application (`app`)."""

    def __init__(self, routes: list[HttpRoute], upstream_timeout: float = 300.0, limits: Limits | None = None,
                 guard: Guard | None = None):
        self.routes = list(routes)
        self.sort_routes()
        limits = limits or Limits()
        super().__init__(upstream_timeout, limits,
                         guard or Guard(limits, self.routes[0].recorder if self.routes else Recorder()))
        for route in self.routes:
            route.proxy = self
            if route.settings.upstream is None and route.settings.command:  # a stdio server behind the route
                route.stdio = CommandUpstream(route, self, list(route.settings.command), route.settings.command_mode,
                                              limits.max_children)
        register_collector(self.guard)
        self.app = web.Application(client_max_size=self.limits.max_body_bytes)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._start)
        self.app.on_shutdown.append(self._stop_children)
        self.app.on_cleanup.append(self._stop)
        self._housekeeping: asyncio.Task[None] | None = None

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
            for session in [*route.sessions, *route.keepers]:
                session.close("the proxy is stopping")
        self.lean.close()
        if self.client:
            await self.client.close()

    async def _stop_children(self, _: web.Application) -> None:
        """Before the requests in flight are waited for: the stdio servers' sessions end (their
        streams with them) and every child is stopped and reaped."""
        await asyncio.gather(*(route.stdio.stop() for route in self.routes if route.stdio is not None),
                             *(close_eras(self, route) for route in self.routes if route.eras))
        for route in self.routes:  # the sessions bridged for 2025-11-25 hosts, their GET streams with them
            close_modern(route)

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING)
            for route in self.routes:
                route.sessions.expire()
                route.keepers.expire()  # the outbox polls of identities whose requests stopped coming
                if route.eras:  # the upstream sessions bridged for 2026-07-28 hosts
                    self.spawn(expire_eras(self, route, self.limits.session_idle_s))
                if route.stdio is not None:  # and the stdio children bridged for them
                    route.stdio.expire(self.limits.session_idle_s)

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
            return await websocket(self, route, request)
        if route.protocol == "a2a" and request.method == "GET" and request.path.endswith(
                CARD_PATHS + ("/extendedAgentCard",)):
            return await agent_card(self, route, request, holding)
        body = await read_body(route, request, holding, self.limits, self.guard)
        if route.stdio is not None:
            return await handle_command(self, route, request, body)
        if takes_modern(route, request, body):  # a 2025-11-25 host, a 2026-07-28 server: the era bridge
            return await handle_modern(self, route, request, body)
        if takes(route, request):  # a 2026-07-28 host, a 2025-11-25 server: the era bridge
            return await bridged(self, route, request, body, holding)
        if request.method == "POST" and "json" in request.headers.get("content-type", ""):
            return await jsonrpc(self, route, request, body, holding)
        # a GET may open a stream of server messages (MCP 2025-11-25, HTTP+SSE): it shares the session's pipeline
        session, kept = await route.session_for(request) if request.method == "GET" else (None, False)
        response = await relay(self, route, request, body, session, kept=kept, holding=holding)
        if request.method == "DELETE" and SESSION_HEADER in {k.lower() for k in request.headers}:
            route.sessions.close(request.headers[SESSION_HEADER])
        return response
