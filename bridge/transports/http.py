"""`reminder-bridge serve`: HTTP (MCP Streamable HTTP in both eras, the 2024-11-05 HTTP+SSE
transport, A2A JSON-RPC + SSE) and WebSocket routes in front of remote servers and agents.

Built on aiohttp (server and client) and websockets. Like the stdio transport, it knows frames
and HTTP, never dialects: every JSON-RPC message goes through the route's sans-I/O pipeline,
SSE is relayed one event at a time, and bytes the pipeline passes are forwarded unchanged.
"""
from __future__ import annotations

import asyncio
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
from cachetools import TTLCache

from bridge.pipeline import HOST, PEER, TICK, Flow, Send, dumps, error_response
from bridge.policy import Policy
from bridge.rules import RouteSettings
from bridge.telemetry import Recorder, Tracing
from bridge.transports.sse import Event, events

#: Hop-by-hop headers (RFC 9110 §7.6.1) and those the proxy recomputes; never forwarded.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade", "content-length"})
#: The proxy reads bodies it may rewrite, so it asks upstreams for uncompressed ones.
NOT_UPSTREAM = HOP_BY_HOP | {"accept-encoding"}
#: A body the upstream encoded anyway goes on with its Content-Encoding (never decoded, never rewritten).
NOT_DOWNSTREAM = HOP_BY_HOP
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
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
    recorder: Recorder = field(init=False)
    shared: Flow | None = field(init=False, default=None)
    sessions: TTLCache = field(init=False)
    declared: dict[str, Any] = field(init=False, default_factory=dict)
    rpc_url: str | None = field(init=False, default=None)  # where the host posts JSON-RPC; the proxy's own requests go there too

    def __post_init__(self) -> None:
        self.prefix = self.prefix.rstrip("/")
        self.recorder = Recorder(route=self.name, log_level=self.log_level, tracing=self.tracing)
        if self.policy is None:
            self.policy = Policy(self.settings, route=self.name)
        self.sessions = TTLCache(maxsize=10_000, ttl=3600)

    @property
    def is_websocket(self) -> bool:
        return self.upstream.startswith(("ws://", "wss://"))

    def new_flow(self, **kwargs: Any) -> Flow:
        from bridge.cli import make_flow

        return make_flow(self.protocol, self.settings, self.recorder, policy=self.policy,
                         **{**self.dialects, **kwargs})

    def flows(self) -> list[Flow]:
        """Every live pipeline of this route (a reload reconfigures them all)."""
        live = [flow for key, flow in self.sessions.items()]
        return ([self.shared] if self.shared is not None else []) + list({id(f): f for f in live}.values())

    def apply(self, settings: RouteSettings, policy: Policy) -> None:
        self.settings, self.policy = settings, policy
        for flow in self.flows():
            flow.reconfigure(settings, policy)

    def flow_for(self, request: web.Request) -> tuple[Flow, bool]:
        """The pipeline for this request, and whether it is new to the MCP session it may start.

        MCP 2025-11-25 state lives per `Mcp-Session-Id`; a 2026-07-28 request is self-contained
        (it carries the client's capabilities), so it gets a fresh flow that knows what the
        server declared. A2A and the rest share one flow per route.
        """
        if self.protocol == "mcp":
            session = request.headers.get(SESSION_HEADER)
            if session is not None and session in self.sessions:
                return self.sessions[session], False
            legacy_sse = self.sessions.get("q:" + request.query_string) if request.query_string else None
            if legacy_sse is not None:
                return legacy_sse, False
            if request.headers.get("mcp-protocol-version") == MODERN_VERSION:
                return self.new_flow(peer_declared=self.declared.get("peer_declared"),
                                     peer_dialect=self.declared.get("peer_dialect") or self.dialects.get(
                                         "peer_dialect")), True
            if session is None:
                return self.new_flow(), True
        if self.shared is None:
            self.shared = self.new_flow()
        return self.shared, False

    def remember(self, flow: Flow, session: str | None) -> None:
        if session:
            self.sessions[session] = flow
        if getattr(flow, "peer_declared", None) is not None:
            self.declared = {"peer_declared": flow.peer_declared, "peer_dialect": flow.peer_dialect}

    def upstream_url(self, path: str, query: str) -> str:
        rest = path[len(self.prefix):] if path.startswith(self.prefix) else path
        base = urlsplit(self.upstream)
        joined = base.path.rstrip("/") + rest if rest not in ("", "/") or not base.path else base.path
        return urlunsplit((base.scheme, base.netloc, joined or "/", query, ""))

    def to_proxy(self, url: str, request: web.Request) -> str:
        """An upstream URL as the caller must see it: at the proxy, under this route's prefix."""
        base = urlsplit(self.upstream)
        parts = urlsplit(url)
        if parts.netloc and parts.netloc != base.netloc:
            return url  # somewhere else entirely: not ours to redirect
        path = parts.path
        base_path = base.path.rstrip("/")
        if base_path and path.startswith(base_path):
            path = path[len(base_path):]
        path = self.prefix + (path if path.startswith("/") or not path else "/" + path)
        if not parts.netloc:
            return urlunsplit(("", "", path or "/", parts.query, parts.fragment))
        return urlunsplit((request.scheme, request.host, path or "/", parts.query, parts.fragment))


class HttpProxy:
    def __init__(self, routes: list[HttpRoute], upstream_timeout: float = 300.0):
        self.routes = sorted(routes, key=lambda r: len(r.prefix), reverse=True)
        self.upstream_timeout = upstream_timeout
        self.client: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._start)
        self.app.on_cleanup.append(self._stop)
        self._ticker: asyncio.Task[None] | None = None

    async def _start(self, _: web.Application) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        # no cookie jar: one client's upstream cookies must never ride on another client's requests
        # (a jar would store Set-Cookie from every answer and add it to every later request)
        self.client = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                            cookie_jar=aiohttp.DummyCookieJar(),
                                            timeout=aiohttp.ClientTimeout(total=None, connect=10))
        self._ticker = asyncio.create_task(self._tick_forever())

    async def _stop(self, _: web.Application) -> None:
        if self._ticker:
            self._ticker.cancel()
        if self.client:
            await self.client.close()

    async def _tick_forever(self) -> None:
        """Routes' pipelines may hold things to send on their own; HTTP has nowhere to push
        host-bound frames outside a response, so only peer-bound ones are sent here."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK)
            for route in self.routes:
                if route.shared is not None:
                    sends = route.shared.tick(loop.time())
                    peer = [s.data for s in sends if s.to == PEER]
                    if peer:
                        asyncio.create_task(self._side_requests(route, route.shared, peer, None))

    def route_for(self, path: str) -> HttpRoute | None:
        for route in self.routes:
            if not route.prefix or path == route.prefix or path.startswith(route.prefix + "/"):
                return route
        return None

    # -- dispatch ------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        route = self.route_for(request.path)
        if route is None:
            return web.Response(status=404, text=f"reminder-bridge: no route for {request.path}\n")
        if route.is_websocket:
            return await self.websocket(route, request)
        if route.protocol == "a2a" and request.method == "GET" and request.path.endswith(
                CARD_PATHS + ("/extendedAgentCard",)):
            return await self.agent_card(route, request)
        if request.method == "POST" and "json" in request.headers.get("content-type", ""):
            return await self.jsonrpc(route, request)
        # a GET may open a stream of server messages (MCP 2025-11-25, HTTP+SSE): it shares the session's pipeline
        flow = route.flow_for(request)[0] if request.method == "GET" else None
        response = await self.relay(route, request, await request.read(), flow)
        if request.method == "DELETE" and SESSION_HEADER in {k.lower() for k in request.headers}:
            route.sessions.pop(request.headers[SESSION_HEADER], None)
        return response

    # -- JSON-RPC over POST ----------------------------------------------------------------
    async def jsonrpc(self, route: HttpRoute, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        route.rpc_url = route.upstream_url(request.path, "")
        flow, fresh = route.flow_for(request)
        sends = _through(flow, body, HOST, request.headers)
        if len(sends) == 1 and sends[0].to == PEER and sends[0].data is body:
            return await self.relay(route, request, body, flow, fresh=fresh)  # the common case: untouched
        host_id = _message_id(body)
        main = None
        side: list[bytes] = []
        replies: list[bytes] = []
        for send in sends:
            if send.to == HOST:
                replies.append(send.data)
            elif main is None and _message_id(send.data) == host_id:
                main = send.data
            else:
                side.append(send.data)
        if side:  # the proxy's own requests go first (SPEC §5: inject, then forward)
            replies += await self._side_requests(route, flow, side, host_id, request)
        if main is not None:
            return await self.relay(route, request, main, flow, fresh=fresh, rewritten=True,
                                    trace=flow.trace_context())
        return _reply(replies, host_id, request)

    async def _side_requests(self, route: HttpRoute, flow: Flow, messages: list[bytes], host_id: Any,
                             request: web.Request | None = None) -> list[bytes]:
        """POST the proxy's own requests upstream; what their answers produce for the host's request
        (e.g. the reply to an inject the proxy checked with `GetTask`) is returned."""
        replies: list[bytes] = []
        headers = _forward_headers(request.headers) if request is not None else {}
        headers["Content-Type"] = "application/json"
        for message in messages:
            try:
                async for frame in self._exchange(route, message, headers):
                    for send in _through(flow, frame, PEER):
                        if send.to == HOST and _message_id(send.data) == host_id:
                            replies.append(send.data)
                        elif send.to == PEER:
                            replies += await self._side_requests(route, flow, [send.data], host_id, request)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                route.recorder.log("upstream_error", route=route.name, why=_cause(exc))
                if host_id is not None:
                    replies.append(dumps(_upstream_error(route, host_id, exc)))
        return replies

    async def _exchange(self, route: HttpRoute, message: bytes, headers: dict[str, str]) -> AsyncIterator[bytes]:
        """One JSON-RPC POST upstream (to the endpoint the host last used); yields every message of
        its answer, JSON or SSE."""
        assert self.client is not None
        url = route.rpc_url or route.upstream_url(route.prefix or "/", "")
        async with self.client.post(url, data=message, headers=headers) as response:
            if "text/event-stream" in response.headers.get("content-type", ""):
                async for event in events(response.content.iter_any()):
                    if event.data is not None:
                        yield event.data
            else:
                data = await response.read()
                if data.strip():
                    yield data

    # -- relay: one request upstream, its answer back ---------------------------------------
    async def relay(self, route: HttpRoute, request: web.Request, body: bytes, flow: Flow | None, *,
                    fresh: bool = False, rewritten: bool = False,
                    trace: dict[str, str] | None = None) -> web.StreamResponse:
        assert self.client is not None
        headers = _forward_headers(request.headers)
        if rewritten:
            _mirror_mcp_headers(headers, body)
        if trace:  # the proxy's span is the parent of what the upstream does with a rewritten request
            for name in [k for k in headers if k.lower() in trace]:
                del headers[name]
            headers.update(trace)
        url = route.upstream_url(request.path, request.query_string)
        try:
            upstream = await asyncio.wait_for(
                self.client.request(request.method, url, data=body if body else None, headers=headers,
                                    allow_redirects=False), self.upstream_timeout)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            route.recorder.log("upstream_error", why=_cause(exc), url=url)
            msg_id = _message_id(body) if body else None
            if msg_id is not None:
                return web.json_response(_upstream_error(route, msg_id, exc))
            return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: upstream {url}: "
                                                 f"{_cause(exc)}\n")
        async with upstream:
            session = upstream.headers.get(SESSION_HEADER)
            if flow is not None and fresh:
                route.remember(flow, session)
            ctype = upstream.headers.get("content-type", "")
            try:
                if "text/event-stream" in ctype:
                    return await self._relay_sse(route, request, upstream, flow, body)
                if flow is not None and "json" in ctype and upstream.headers.get("content-length") is None:
                    return await _relay_json_stream(request, upstream, flow, _message_id(body))
                if flow is not None and "json" in ctype:
                    try:
                        data = await upstream.read()
                    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:  # it died mid-answer
                        route.recorder.log("upstream_error", why=_cause(exc), url=url)
                        msg_id = _message_id(body) if body else None
                        if msg_id is None:
                            return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: "
                                                                 f"upstream {url}: {_cause(exc)}\n")
                        return web.json_response(_upstream_error(route, msg_id, exc))
                    return web.Response(status=upstream.status, body=_json_reply(flow, data, _message_id(body)),
                                        headers=_response_headers(upstream))
                return await _stream_raw(request, upstream)
            finally:
                if flow is not None and fresh:
                    route.remember(flow, session)  # what the handshake taught the pipeline

    async def _relay_sse(self, route: HttpRoute, request: web.Request, upstream: aiohttp.ClientResponse,
                         flow: Flow | None, body: bytes = b"") -> web.StreamResponse:
        """Relay an SSE stream event by event, as the upstream sends them: never buffered.

        An upstream that goes away mid-stream ends the stream cleanly; if the host's request has
        not been answered on it yet, a JSON-RPC error event answers it first (SPEC §8.3)."""
        response = web.StreamResponse(status=upstream.status, headers=_response_headers(upstream))
        await response.prepare(request)
        last: Event | None = None
        try:
            async for event in events(upstream.content.iter_any()):
                out = self._sse_event(route, request, event, flow)
                if out:
                    await response.write(out)
                    last = event
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, asyncio.TimeoutError) as exc:
            if request.transport is None or request.transport.is_closing():
                raise  # the host is gone too: nothing to tell
            route.recorder.log("upstream_error", why=_cause(exc), url=str(upstream.url), during="stream")
            msg_id = _message_id(body) if body else None
            if msg_id is not None and not (last is not None and last.data is not None
                                           and _answers(last.data, msg_id)):
                await response.write(b"event: message\ndata: " + dumps(_upstream_error(route, msg_id, exc)) + b"\n\n")
        await response.write_eof()
        return response

    def _sse_event(self, route: HttpRoute, request: web.Request, event: Event, flow: Flow | None) -> bytes:
        if event.data is None:
            return event.raw  # keep-alive comments and retry hints pass as they are
        if (b"event", b"endpoint") in event.fields:  # 2024-11-05 HTTP+SSE: where to POST, at the proxy
            url = event.data.decode()
            if flow is not None:
                route.sessions["q:" + urlsplit(url).query] = flow
            mapped = route.to_proxy(url, request)
            return event.raw if mapped == url else event.with_data(mapped.encode())
        if flow is None:
            return event.raw
        sends = _through(flow, event.data, PEER)
        peer = [s.data for s in sends if s.to == PEER]
        if peer:  # the proxy's own follow-ups (e.g. an inject once the task is named)
            asyncio.create_task(self._side_requests(route, flow, peer, None, request))
        host = [s.data for s in sends if s.to == HOST]
        if len(host) == 1 and host[0] is event.data:
            return event.raw
        parts = [event.with_data(data, keep_id=i == len(host) - 1) for i, data in enumerate(host)]
        return b"".join(parts)

    # -- A2A agent card -------------------------------------------------------------------------
    async def agent_card(self, route: HttpRoute, request: web.Request) -> web.StreamResponse:
        assert self.client is not None
        url = route.upstream_url(request.path, request.query_string)
        try:
            async with self.client.get(url, headers=_forward_headers(request.headers)) as upstream:
                data = await upstream.read()
                headers = _response_headers(upstream)
                status = upstream.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: upstream {url}: "
                                                 f"{_cause(exc)}\n")
        flow, _ = route.flow_for(request)
        try:
            card = json.loads(data)
        except ValueError:
            return web.Response(status=status, body=data, headers=headers)
        rewritten = flow.rewrite_card(card, lambda u: route.to_proxy(u, request))  # type: ignore[attr-defined]
        if rewritten is None or status != 200:
            return web.Response(status=status, body=data, headers=headers)
        headers.pop("ETag", None)  # a different body: the upstream's validator no longer names it
        return web.Response(status=status, body=dumps(rewritten), headers=headers)

    # -- WebSocket -----------------------------------------------------------------------------
    async def websocket(self, route: HttpRoute, request: web.Request) -> web.StreamResponse:
        """JSON-RPC text frames, rewritten exactly as on stdio; close codes mirrored."""
        host = web.WebSocketResponse(protocols=_subprotocols(request), max_msg_size=64 * 1024 * 1024,
                                     autoping=True)
        await host.prepare(request)
        url = route.upstream_url(request.path, request.query_string)
        extra = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "cookie")}
        try:
            peer = await websockets.connect(url, subprotocols=_subprotocols(request) or None,
                                            additional_headers=extra, max_size=64 * 1024 * 1024,
                                            open_timeout=10)
        except (OSError, websockets.WebSocketException, asyncio.TimeoutError) as exc:
            await host.close(code=1011, message=f"upstream {url}: {_cause(exc)}".encode()[:120])
            return host
        flow = route.new_flow()

        async def deliver(sends: list[Send]) -> None:
            for send in sends:
                if send.to == PEER:
                    await peer.send(send.data.decode())
                else:
                    await host.send_str(send.data.decode())

        async def host_to_peer() -> None:
            async for msg in host:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await deliver(_through(flow, msg.data.encode(), HOST))
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    await peer.send(msg.data)
            await peer.close(code=host.close_code or 1000, reason="")

        async def peer_to_host() -> None:
            try:
                async for message in peer:
                    if isinstance(message, str):
                        await deliver(_through(flow, message.encode(), PEER))
                    else:
                        await host.send_bytes(message)
            except websockets.ConnectionClosed:
                pass
            code = peer.close_code or 1000
            await host.close(code=code, message=(peer.close_reason or "").encode())

        tasks = [asyncio.create_task(host_to_peer()), asyncio.create_task(peer_to_host())]
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await peer.close()
        return host


# -- helpers -------------------------------------------------------------------------------------
def _message_id(data: bytes) -> Any:
    try:
        msg = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return msg.get("id") if isinstance(msg, dict) else None


def _forward_headers(headers: Any) -> dict[str, str]:
    """The host's headers for the upstream, asking for an unencoded body: without an explicit
    Accept-Encoding, aiohttp's client would add `gzip, deflate` on its own."""
    forwarded = {k: v for k, v in headers.items() if k.lower() not in NOT_UPSTREAM}
    forwarded["Accept-Encoding"] = "identity"
    return forwarded


def _response_headers(upstream: aiohttp.ClientResponse) -> dict[str, str]:
    return {k: v for k, v in upstream.headers.items() if k.lower() not in NOT_DOWNSTREAM}


def _mirror_mcp_headers(headers: dict[str, str], body: bytes) -> None:
    """MCP 2026-07-28 mirrors the method (and tool/resource name) in headers: keep them true."""
    names = {k.lower(): k for k in headers}
    if "mcp-method" not in names:
        return
    try:
        msg = json.loads(body)
    except ValueError:
        return
    if isinstance(msg, dict) and isinstance(msg.get("method"), str):
        headers[names["mcp-method"]] = msg["method"]
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        name = params.get("name", params.get("uri"))
        if "mcp-name" in names and isinstance(name, str):
            headers[names["mcp-name"]] = name


def _subprotocols(request: web.Request) -> list[str]:
    value = request.headers.get("Sec-WebSocket-Protocol", "")
    return [p.strip() for p in value.split(",") if p.strip()]


def _main_reply(sends: list[Send], original: bytes, msg_id: Any) -> bytes:
    """A JSON response carries one message: the answer to the request. Pipelines put what they
    add (e.g. an A2A `reminderUpdate` frame) before the message it came with, so the last match
    is the answer; the extras have nowhere to go in a JSON body."""
    host = [s.data for s in sends if s.to == HOST]
    for data in reversed(host):
        if data is original or _message_id(data) == msg_id:
            return data
    return host[-1] if host else original


def _reply(replies: list[bytes], host_id: Any, request: web.Request) -> web.StreamResponse:
    """The proxy answers the host itself (an invalid reminder, a queued inject, a refusal)."""
    if not replies:
        return web.Response(status=202)
    answer = _main_reply([Send(HOST, r) for r in replies], replies[-1], host_id)
    headers = {}
    try:
        error = json.loads(answer).get("error") or {}
        retry = (error.get("data") or {}).get("retryAfterMs") if isinstance(error.get("data"), dict) else None
    except (ValueError, AttributeError):
        retry = None
    if isinstance(retry, (int, float)):
        headers["Retry-After"] = str(max(1, math.ceil(retry / 1000)))
    return web.Response(body=answer, content_type="application/json", headers=headers)


def _json_reply(flow: Flow, data: bytes, msg_id: Any) -> bytes:
    """One JSON body (or one line of a streamed one) through the pipeline: one message out."""
    if not data.strip():
        return data
    sends = _through(flow, data, PEER)
    if len(sends) == 1 and sends[0].data is data:
        return data
    return _main_reply(sends, data, msg_id)


async def _relay_json_stream(request: web.Request, upstream: aiohttp.ClientResponse, flow: Flow,
                             msg_id: Any) -> web.StreamResponse:
    """A JSON answer the upstream streams (no Content-Length), e.g. newline-delimited messages on a
    stream that stays open (a `subscriptions/listen` answered as JSON lines): each line that is a
    whole message goes through the pipeline and on to the host at once, never held until the upstream
    closes. A body that is not one message a line (pretty-printed JSON) is read to its end as before."""
    response = web.StreamResponse(status=upstream.status, headers=_response_headers(upstream))
    await response.prepare(request)
    pending = bytearray()  # an unfinished line; once a line alone was no JSON, the rest of the body
    scanned = 0  # how much of `pending` holds no newline
    whole = False
    async for chunk in upstream.content.iter_any():
        pending += chunk
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
            reply = _json_reply(flow, line, _message_id(line))
            await response.write(reply if reply is line else reply + b"\n")
        scanned = len(pending)
    if pending:
        rest = bytes(pending)
        await response.write(_json_reply(flow, rest, msg_id if whole else _message_id(rest)))
    await response.write_eof()
    return response


async def _stream_raw(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """Anything the pipeline need not read (GET, DELETE, 202s, 405s, binary bodies): bytes as they come."""
    response = web.StreamResponse(status=upstream.status, headers=_response_headers(upstream))
    if upstream.headers.get("content-length") is not None and "text/event-stream" not in upstream.headers.get(
            "content-type", ""):
        response.content_length = int(upstream.headers["content-length"])
    await response.prepare(request)
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


def _through(flow: Flow, data: bytes, origin: str, headers: Any = None) -> list[Send]:
    """One frame through the pipeline; if the pipeline fails on it, the frame goes on untouched
    (logged as pipeline_error) instead of costing the request or the stream it is part of."""
    try:
        return flow.from_host(data, headers=headers) if origin == HOST else flow.from_peer(data)
    except Exception as exc:
        flow.recorder.log("pipeline_error", level="error", side=origin, error=f"{type(exc).__name__}: {exc}"[:300],
                          why="the frame goes on untouched")
        return [Send(PEER if origin == HOST else HOST, data)]


def _answers(data: bytes, msg_id: Any) -> bool:
    """Whether ``data`` is the response to the request ``msg_id``."""
    try:
        msg = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(msg, dict) and "method" not in msg and msg.get("id") == msg_id


def _upstream_error(route: HttpRoute, msg_id: Any, exc: BaseException) -> dict[str, Any]:
    return error_response(msg_id, -32603, f"reminder-bridge route {route.name!r}: upstream {route.upstream} "
                                          f"{_cause(exc)}", {"route": route.name, "upstream": route.upstream,
                                                            "cause": _cause(exc)})
