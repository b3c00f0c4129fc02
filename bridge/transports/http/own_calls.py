"""What the proxy sends upstream of its own accord (the calls a flow makes, the messages it sends,
the follow-ups an upstream frame asks for) and what a session's flow sends its host unasked. Here
too are the client, limits and tasks every job of the proxy shares: `HttpProxy` is an `OwnCalls`."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web

from bridge.jsonrpc import dumps
from bridge.pipeline.commands import HOST, PEER, Call, Command, Forward, Send, Write, receipts_of
from bridge.pipeline.flow import Flow
from bridge.rules import Limits
from bridge.transports.driver import FlowDriver
from bridge.transports.forwarding import upstream_headers
from bridge.transports.guard import Guard, Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.listening import Listener
from bridge.transports.http.routes import HttpRoute
from bridge.transports.http.upstream_client import UpstreamPool, wants_lean
from bridge.transports.http.upstream_errors import cause, upstream_error
from bridge.transports.sessions import Session
from bridge.transports.sse import EventTooLarge, events, message_event


def written(session: Session, messages: list[Write]) -> None:
    """``messages`` are on the host's connection: what they deliver counts as delivered now."""
    receipts = receipts_of(messages)
    if receipts:
        session.driver.perform(session.flow.written(receipts))


def through(flow: Flow, data: bytes, origin: str, headers: Any = None) -> list[Command]:
    return flow.from_host(data, headers=headers) if origin == HOST else flow.from_peer(data)


async def settled(session: Session, data: bytes, origin: str, headers: Any = None) -> list[Command]:
    """`through`, with the shared state it asks for performed (awaited on Redis), in order; what a
    host frame showed the flow of a 2026-07-28 request, its keeper learns at once (`Session.kept`).
    A frame that meets an idle flow and passes (the common case) is its own `Forward`: nothing to
    perform, so no trip through the driver."""
    flow = session.flow
    if not flow.busy:
        commands = through(flow, data, origin, headers)
        if not (len(commands) == 1 and type(commands[0]) is Forward):
            commands = await session.driver.performed(commands)
    else:
        commands = await session.driver.fed(flow, lambda: through(flow, data, origin, headers))
    if origin == HOST and session.keeper is not None:
        session.keeper.kept(session)
    return commands


def own_headers(headers: dict[str, str], call: Call) -> dict[str, str]:
    """The headers of the host request the session's own requests reuse, made true to ``call``:
    a 2026-07-28 request mirrors its own method and name (`Mcp-Method`, `Mcp-Name`), never those of
    the host request they were copied from, which a server refuses as a mismatch."""
    names = {k.lower(): k for k in headers}
    if "mcp-method" not in names or call.method is None:
        return headers
    out = {k: v for k, v in headers.items() if k.lower() != "mcp-name"}
    out[names["mcp-method"]] = call.method
    if call.name is not None:
        out[names.get("mcp-name", "Mcp-Name")] = call.name
    return out


class OwnCalls:
    """The proxy's upstream client and background tasks, and the requests it makes with them."""

    def __init__(self, upstream_timeout: float, limits: Limits, guard: Guard):
        self.upstream_timeout = upstream_timeout
        self.limits = limits
        #: connections, timeouts and the memory budget; `serve` wraps its listener with it
        self.guard = guard
        self.client: aiohttp.ClientSession | None = None
        #: the host's requests to a plain-HTTP upstream (`upstream_client`: leaner than aiohttp's)
        self.lean = UpstreamPool()
        self._tasks: set[asyncio.Task[Any]] = set()

    async def upstream(self, method: str, url: str, *, data: bytes | None = None, headers: dict[str, str],
                       allow_redirects: bool = False) -> Any:
        """A request of the host's (or of the era bridge for it) to ``url``, up to its answer's headers:
        on the lean client toward a plain-HTTP upstream, else on aiohttp's (``allow_redirects``: there only)."""
        if wants_lean(url):
            return await self.lean.request(method, url, data=data, headers=headers)
        assert self.client is not None
        return await self.client.request(method, url, data=data, headers=headers, allow_redirects=allow_redirects)

    def driver_for(self, route: HttpRoute, session: Session,
                   upstream: Callable[[Write], None] | None = None) -> FlowDriver:
        """A session's timers and deferred work: what its flow sends on its own (a coalesced reminder
        released, an outbox poll) goes to the session's host stream, or upstream (``upstream``: what
        carries its messages and calls there instead, the era bridge)."""

        def write(command: Write) -> None:
            if command.to == HOST:
                self._to_host(session, [command], route)
            elif upstream is not None:
                upstream(command)
            else:
                self.spawn(self._post(route, session, command.data))

        if upstream is not None:
            return FlowDriver(session.flow, write, upstream)
        return FlowDriver(session.flow, write, lambda call: self.spawn(self._call_and_push(route, session, call)))

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _to_host(self, session: Session, messages: list[Write], route: HttpRoute) -> None:
        """Messages the session's flow sends on its own: on its open stream, else ahead of its next
        answer; those it names a listen stream for (`Send.stream`), there."""
        messages = self.to_listen(route, session, messages)
        if not messages:
            return
        stream = next((s for s in session.streams if not s.task_done), None)
        if stream is None:
            session.hold(messages)
            return
        self.spawn(self.write_messages(session, stream.response, messages))

    async def write_messages(self, session: Session, response: web.StreamResponse, messages: list[Write]) -> bool:
        """``messages`` on an open SSE answer, one event each, each reported written once it is; if the
        stream ends under us, the rest wait for the session's next answer (False)."""
        for i, message in enumerate(messages):
            try:
                await response.write(message_event(message.data))
            except (ConnectionError, RuntimeError):
                session.hold(messages[i:])
                return False
            written(session, [message])
        return True

    def to_listen(self, route: HttpRoute, session: Session, messages: list[Write]) -> list[Write]:
        """The messages that name a listen stream (`Send.stream`) written on it, in the order given;
        returns the rest.  One whose stream is gone, or would pass the stream's byte bound, is
        dropped unwritten (its owner keeps what it delivers) and logged."""
        rest: list[Write] = []
        for message in messages:
            if type(message) is not Send or message.stream is None:
                rest.append(message)
                continue
            self.on_listener(route, session, route.listening.get(session.flow.scope, message.stream), message)
        return rest

    def on_listener(self, route: HttpRoute, session: Session, listener: Listener | None, message: Send) -> None:
        """``message`` written on an open listen stream, after what was given it before; dropped
        unwritten (its owner keeps what it delivers) and logged when the stream is gone or the
        message would pass the stream's byte bound."""
        if listener is None or not listener.room(len(message.data)):
            route.recorder.log("listen_stream_unwritten", why="the listen stream ended" if listener is None
                               else "the listen stream's host reads too slowly (its bytes bound)")
            session.flow.unwritten(message.receipts)
            return
        listener.queued += len(message.data)
        self.spawn(self._write_listen(session, listener, message))

    async def _write_listen(self, session: Session, listener: Listener, message: Send) -> None:
        try:
            await listener.response.write(message_event(message.data))
        except (ConnectionError, RuntimeError):
            session.flow.unwritten(message.receipts)
            return
        finally:
            listener.queued -= len(message.data)
        written(session, [message])

    async def _call_and_push(self, route: HttpRoute, session: Session, call: Call) -> None:
        """A call the flow made on its own: what its answer gives the host goes to the session."""
        host = [c for c in await self.calls(route, session, [call], None) if c.to == HOST]
        if host:
            self._to_host(session, host, route)

    async def calls(self, route: HttpRoute, session: Session, calls: list[Call],
                    request: web.Request | None) -> list[Write]:
        """POST the proxy's own requests upstream and feed every answer back to the flow that asked;
        returns what the answers give the host (e.g. the reply to an inject checked with `GetTask`).
        An upstream that cannot answer is told to the flow as a JSON-RPC error for its call."""
        flow = session.flow
        headers = dict(session.headers) if session.headers else dict(route.target.own)
        headers["Content-Type"] = "application/json"
        out: list[Write] = []
        for call in calls:
            answers: list[bytes] = []
            try:
                async for frame in self._exchange(route, call.data, own_headers(headers, call)):
                    answers.append(frame)
            except (aiohttp.ClientError, asyncio.TimeoutError, TooLarge, EventTooLarge) as exc:
                route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="the proxy's own request")
                answers = [dumps(upstream_error(route, call.id, exc))]
            for frame in answers:
                for command in await session.driver.settle(through(flow, frame, PEER)):
                    if isinstance(command, Call):
                        out += await self.calls(route, session, [command], request)
                    elif isinstance(command, Write) and command.to == HOST:
                        out.append(command)
        return out

    async def _post(self, route: HttpRoute, session: Session, message: bytes) -> None:
        """A message the flow sends upstream on its own, answer unread (nothing waits for it)."""
        try:
            async for _ in self._exchange(route, message, {**(session.headers or {}), "Content-Type": "application/json"}):
                pass
        except (aiohttp.ClientError, asyncio.TimeoutError, TooLarge, EventTooLarge) as exc:
            route.recorder.log("upstream_error", why=route.shown(cause(exc)), during="the proxy's own message")

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
                data = await read_answer(response, Holding(self.guard.budget), self.limits, release=True)
                if data.strip():
                    yield data

    def upstream_headers(self, route: HttpRoute, request: web.Request, websocket: bool = False) -> dict[str, str]:
        return upstream_headers(request.headers, client=request.remote, host=request.host, scheme=request.scheme,
                                own=route.target.own, websocket=websocket)

    async def through_peer(self, route: HttpRoute, request: web.Request, session: Session,
                           data: bytes) -> list[Write]:
        """One upstream frame through the session's flow; the proxy's own follow-ups (an inject once
        the answer names the task) go upstream on their own; the rest is for the host."""
        commands = await settled(session, data, PEER)
        if route.shared is not None:  # a handshake answer this frame settled is recorded before it goes on
            await route.record_before_answer(session)
        if len(commands) == 1 and isinstance(only := commands[0], Forward):
            return [only]
        host: list[Write] = []
        for command in await session.driver.settle(commands):
            if isinstance(command, Call):
                self.spawn(self._call_and_push(route, session, command))
            elif not isinstance(command, Write):
                continue
            elif command.to == PEER:
                self.spawn(self._post(route, session, command.data))
            else:
                host.append(command)
        return self.to_listen(route, session, host)
