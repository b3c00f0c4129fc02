"""`reminder-bridge stdio --upstream URL`: a stdio host (Claude Desktop, an SDK's stdio client) in
front of a remote MCP server over HTTP, with every reminder rule of the stdio route.

The host side is the stdio proxy's own (`StdioProxy`: line cutting, the flow, timers, backpressure
toward the host); what it would write to a child's stdin is POSTed instead, one message a request,
and every message of each answer (a JSON body, or each event of an SSE stream) goes through the
same flow toward the host, as a line the child would have written.  The transport reads no frame:
the flow says which requests still wait (`awaits`), what a POST mirrors in headers
(`http_headers`), and what the host gets when the upstream cannot answer (`upstream_gone`).

Streamable HTTP in both eras: the session the answer to `initialize` names is sent on every
request, a GET stream carries the server's own messages (a 405 says there is none) and resumes with
`Last-Event-ID`, as does a POST's stream that breaks before its answer; the session is DELETEd when
the host leaves. A server that lost the session (404) gets the host's `initialize` and `initialized`
again, and the request that found it goes again, once, in the new session. `--upstream-timeout`
bounds each request: connecting and its answer (a JSON body whole, a stream's every next event).
A 2026-07-28 host's self-contained requests go as it wrote them. The 2024-11-05 HTTP+SSE transport
(`--upstream-transport sse`, or found by `auto`): one stream, whose `endpoint` event names where to
POST, carries every answer.

Memory is bounded in bytes: host messages waiting for or in their POST (`MAX_OUTBOUND_BYTES`, and
`MAX_OUTBOUND` of them: the host is not read past either), answers read whole (the
`max_inflight_bytes` budget, `max_response_bytes` each), events (`max_event_bytes`); and no answer
is read further while the host's pipe is full.
"""
from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import aiohttp

from bridge.jsonrpc import dumps, error_response, loads
from bridge.pipeline.commands import PEER, Call, Command, Forward, Write
from bridge.pipeline.flow import Flow
from bridge.policy import Policy
from bridge.rules import Limits, RouteSettings
from bridge.telemetry import Recorder
from bridge.transports.forwarding import Upstream
from bridge.transports.guard import ByteBudget, Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.upstream_errors import TimedOut, cause, upstream_error
from bridge.transports.remote_session import AUTO, RemoteSession, Resume, one_line
from bridge.transports.sse import EventTooLarge, events
from bridge.transports.stdio import CONNECTION_CLOSED, DRAIN_GRACE, MAX_LINE, STOP_GRACE, StdioProxy

#: Host messages waiting for or in their POST, in bytes and in number (each holds a task): past
#: either the host is not read until both fall under half (one message larger still goes, alone).
MAX_OUTBOUND_BYTES = 8 * 1024 * 1024
MAX_OUTBOUND = 1024
#: POSTs in flight at once (the connection pool holds as many, and the streams beside them).
MAX_POSTS = 64
#: A stream that breaks is resumed this many times in a row without an event before the proxy gives up.
MAX_RESUMES = 3
#: How long the DELETE that ends the session may take when the host leaves.
DELETE_TIMEOUT_S = 2.0
#: `--upstream-timeout`, its default: connecting and the answer (a JSON body whole, a stream's every
#: next event), per request
UPSTREAM_TIMEOUT_S = 300.0
#: What an upstream failure may raise: the HTTP client's errors, a timeout, a socket, a limit passed.
FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError, TooLarge, EventTooLarge)


class Refused(Exception):
    """The upstream answered with an HTTP error, or not as MCP answers."""

    @classmethod
    def status(cls, response: aiohttp.ClientResponse) -> Refused:
        return cls(f"answered HTTP {response.status} {response.reason or ''}".rstrip())


class RemoteProxy(StdioProxy):
    """Relays between our stdin/stdout (the host) and an MCP server at ``url`` over HTTP."""

    def __init__(self, url: str, headers: dict[str, str], settings: RouteSettings, protocol: str | None,
                 recorder: Recorder, host_dialect: str | None = None, peer_dialect: str | None = None,
                 max_line: int = MAX_LINE, policy: Policy | None = None, *, transport: str = AUTO,
                 limits: Limits | None = None, timeout: float = UPSTREAM_TIMEOUT_S):
        super().__init__([url], settings, protocol, recorder, host_dialect, peer_dialect, max_line, policy,
                         started=None)
        #: the URL, the route's own headers (auth), and how both are shown (secrets redacted)
        self.target = Upstream(url, headers)
        self.command = [self.target.shown]
        self.remote = RemoteSession(self.target, transport)
        self.limits = limits or Limits()
        self.timeout = timeout
        self.budget = ByteBudget(self.limits.max_inflight_bytes)
        self.client: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._posts: set[asyncio.Task[Any]] = set()
        self._stream: asyncio.Task[Any] | None = None  # the GET stream (2024-11-05: the one stream)
        self._outbound = 0  # bytes of host messages waiting for or in their POST
        self._outbound_full = False
        self._slots: asyncio.Semaphore | None = None
        #: the first POST's answer has its headers: the session (or the transport) is known
        self._first: asyncio.Future[None] | None = None
        self._endpoint: asyncio.Future[None] | None = None  # 2024-11-05: the stream named where to POST
        self._readable: asyncio.Event | None = None  # clear while the host's pipe is full (or the backlog long)
        self._host_full = False
        self._closing = False
        self._session_lost = False  # the server lost the session (404) and it could not be opened again (said once)
        self._reopening: asyncio.Task[bool] | None = None  # the last time the session was opened again
        self._handshake: asyncio.Future[None] | None = None  # bridged: the POST of `initialized`, once it is made
        self._signal: int | None = None

    def shown(self, text: str) -> str:
        """``text`` without the upstream's secrets (its userinfo, query values and header values)."""
        return self.target.scrub(text)

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._finished = loop.create_future()
        self._readable = asyncio.Event()
        self._readable.set()
        self._slots = asyncio.Semaphore(MAX_POSTS)
        await self._open_host_output(loop)
        self.client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_POSTS + 2),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout))
        await self._open_host_input(loop)
        self._started = True
        self.recorder.info("upstream", url=self.target.shown, transport=self.remote.transport)
        if self._host_sink is not None and self._host_sink.closed.done():  # the host went while we started
            self.host_output_lost()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, _: loop.call_soon_threadsafe(self._forward_signal, signum))
        try:
            await self._finished
            self._stopped(None)  # what the upstream never answered
            if self._host_writer is not None and self._host_sink is not None:
                self._host_writer.close()  # flushes what is still buffered for the host, within the grace
                try:
                    await asyncio.wait_for(asyncio.shield(self._host_sink.closed), DRAIN_GRACE)
                except TimeoutError:
                    self._host_writer.abort()
        finally:
            self._stop_timers()
            for task in list(self._tasks):
                task.cancel()
            await self.client.close()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._note("upstream_closed", level="info", url=self.target.shown)
        return 0 if self._signal is None else 128 + self._signal

    def ready(self) -> bool:
        return self.client is not None and not self._closing

    def status(self) -> dict[str, Any]:
        return {**super().status(), "upstream": self.target.shown}

    def _stop_child(self, abort: bool) -> None:
        """Where the stdio proxy stops its child (the host's goodbye: answers in flight get
        STOP_GRACE to arrive; ``abort``: at once), the upstream session ends."""
        self._spawn(self._wind_down(0 if abort else STOP_GRACE))

    def host_output_lost(self) -> None:
        """Nothing reaches the host any more: what is in flight is dropped and the session ended."""
        if self._host_gone or not self._started or self._finished is None or self._finished.done():
            return
        self._host_gone = True  # what the upstream still says is dropped (`_write` to a closed pipe)
        self.resume_child()
        if self._host_reader is not None:
            self._host_reader.close()
        self._stop_child(abort=True)
        self._note("host_gone", why="the host closed its end of stdout; ending the upstream session")

    def _forward_signal(self, sig: int) -> None:
        """SIGINT and SIGTERM end the session at once (what is in flight is answered with an error)."""
        self._signal = sig
        self._spawn(self._wind_down(0))

    async def _wind_down(self, grace: float) -> None:
        posts = list(self._posts)
        if grace and posts:
            await asyncio.wait(posts, timeout=grace)
        for task in self._posts:
            task.cancel()
        if self._closing:  # a second reason (a signal during the host's goodbye) only hurries the first
            return
        self._closing = True
        if posts:
            await asyncio.wait(posts)
        if self._stream is not None:
            self._stream.cancel()
        await self._delete()
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(None)

    async def _delete(self) -> None:
        """End the session at the server (MCP: DELETE; a 405 says the server keeps it)."""
        if self.remote.session_id is None or self.remote.legacy or self.client is None:
            return
        try:
            async with asyncio.timeout(DELETE_TIMEOUT_S):
                async with self.client.delete(self.remote.url, headers=self.remote.headers(self._mirrored()),
                                              allow_redirects=False) as response:
                    self._note("upstream_session_ended", level="info", status=response.status)
        except FAILURES as exc:
            self._note("upstream_session_ended", level="info", why=self.shown(cause(exc)))
        self.remote.ended()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- backpressure: a full host pipe stops reading answers; a long POST queue stops the host --
    def pause_child(self) -> None:
        if not self._host_gone and self._readable is not None:
            self._host_full = True
            self._readable.clear()

    def resume_child(self) -> None:
        self._host_full = False
        if self._readable is not None and not self._backlog_full:
            self._readable.set()

    def _hold_sources(self, held: bool) -> None:
        """The flow's backlog behind shared state is long: read neither the host nor the upstream."""
        self._backlog_full = held
        if self._host_reader is not None:
            if held:
                self._host_reader.pause_reading()
            elif not self._host_paused.is_set():
                self._host_reader.resume_reading()
        if self._readable is not None:
            if held:
                self._readable.clear()
            elif not self._host_full:
                self._readable.set()

    async def _chunks(self, response: aiohttp.ClientResponse, idle: float | None = None) -> AsyncIterator[bytes]:
        """An answer's bytes as they come, none read while the host's pipe is full; ``idle``: the
        longest wait for the next (a POST's stream; the GET stream may rightly say nothing for long)."""
        while True:
            async with asyncio.timeout(idle):
                chunk = await response.content.readany()
            if not chunk:
                return
            yield chunk
            if self._readable is not None and not self._readable.is_set():
                await self._readable.wait()

    # -- toward the upstream ------------------------------------------------------------------
    def _to_peer(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if line.strip():
                self._send(line)

    def _to_server(self, writes: list[Write]) -> None:
        """What the era bridge writes toward the server: a POST each, a listen's unbounded in time."""
        for write in writes:
            self._send(write.data, lasting=write.lasting)

    def _sort(self, commands: list[Command], to_host: list[bytes], to_peer: list[bytes], later: list[Any]) -> None:
        """As the stdio proxy sorts them, but each of the proxy's own requests goes on a POST of its
        own, so that an upstream that cannot answer it answers the flow's call with an error; and
        so does a request the flow calls `lasting` (a listen: no idle bound on its answer)."""
        if not any(type(c) is Call or (type(c) is Forward and c.lasting) for c in commands):
            super()._sort(commands, to_host, to_peer, later)
            return
        for command in commands:
            if type(command) is Call and command.to == PEER:
                self._call(command)
            elif type(command) is Forward and command.lasting and command.to == PEER:
                self._lasting(command.data)
            else:
                super()._sort([command], to_host, to_peer, later)

    def _lasting(self, frame: bytes) -> None:
        """A listen of the host's on a POST of its own (through the era bridge, when one speaks for
        the flow), its answer unbounded in time."""
        if self.eras is None:
            self._send(frame, lasting=True)
            return
        back = self._bridged(self.eras.toward_server(frame, lasting=True))
        if back:
            self._route(back, from_host=False, bridged=True)

    def _start_flow(self, first_frame: bytes) -> Flow:
        flow = super()._start_flow(first_frame)
        assert self.driver is not None
        host_call = self.driver.call
        self.driver.call = lambda call: self._call(call) if call.to == PEER else host_call(call)
        return flow

    def _call(self, call: Call) -> None:
        if self.eras is not None:  # the era bridge speaks for the flow toward the server: its calls too
            self._write(call.data + b"\n", to_host=False)
            return
        self._send(call.data, call.id)

    def _send(self, frame: bytes, call_id: Any = None, lasting: bool = False) -> None:
        """One message POSTed (``call_id``: the proxy's own request's id), bounded in bytes;
        ``lasting``: its answer is a stream no idle bound cuts (`Forward.lasting`)."""
        if self._closing or self.client is None:
            return
        self._outbound += len(frame)
        # (the proxy's own requests are no part of the host's opening)
        completes = call_id is None and self.remote.posting(frame)
        after = self._handshake
        if completes and self.eras is not None:  # the era bridge's promise: `initialized` before anything else
            self._handshake = asyncio.get_running_loop().create_future()
        task = self._spawn(self._post(frame, call_id, after, self._handshake if completes else None, lasting))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)
        if (self._outbound > MAX_OUTBOUND_BYTES or len(self._posts) > MAX_OUTBOUND) and not self._outbound_full:
            self._outbound_full = True
            self.pause_host()

    async def _post(self, frame: bytes, call_id: Any = None, after: asyncio.Future[None] | None = None,
                    done: asyncio.Future[None] | None = None, lasting: bool = False) -> None:
        """``after``: a POST this one waits for (the handshake's last); ``done``: set once this one is over."""
        try:
            first = self._first is None
            if first:
                self._first = asyncio.get_running_loop().create_future()
            else:  # every POST after the first waits for its answer's headers: the session they belong to
                await asyncio.shield(self._first)
            if after is not None:
                await asyncio.shield(after)
            if self._reopening is not None and not self._reopening.done():  # (and for the session again)
                await asyncio.shield(self._reopening)
            assert self._slots is not None
            async with self._slots:
                await self._exchange(frame, first, call_id, lasting=lasting)
        except asyncio.CancelledError:
            self._stopped(frame, call_id)
            raise
        finally:
            if self._first is not None and not self._first.done() and first:
                self._first.set_result(None)
            if done is not None and not done.done():
                done.set_result(None)
            self._outbound -= len(frame)
            if self._outbound_full and self._outbound <= MAX_OUTBOUND_BYTES // 2 \
                    and len(self._posts) <= MAX_OUTBOUND // 2 + 1:  # (this one is still among them)
                self._outbound_full = False
                self.resume_host()

    def _mirrored(self, frame: bytes = b"") -> dict[str, str]:
        """What the protocol mirrors in headers: of ``frame``, or (none given) of the session; in the
        server's era when the era bridge speaks for the host."""
        if self.eras is not None and not self.eras.through:
            return self.eras.http_headers(frame)
        return self.flow.http_headers(frame) if self.flow is not None else {}

    async def _exchange(self, frame: bytes, first: bool, call_id: Any = None, retried: bool = False,
                        lasting: bool = False) -> None:
        """One host message POSTed; every message of its answer through the flow toward the host.
        A request the server refuses because it lost the session goes again, once (``retried``),
        in the session opened again for it (`_reopened`)."""
        assert self.client is not None
        sent = self.remote.session_id
        try:
            if self.remote.legacy and self.remote.endpoint is None:
                await self._open_legacy()
            deadline = asyncio.get_running_loop().time() + self.timeout  # connecting and the answer
            async with asyncio.timeout_at(deadline):
                response = await self.client.post(self.remote.post_url(), data=frame,
                                                  headers=self.remote.headers(self._mirrored(frame)),
                                                  allow_redirects=False)
        except (*FAILURES, Refused) as exc:
            self._gone(frame, exc, call_id)
            return
        async with response:
            if self.remote.answered(response.status, response.headers, first):
                response.release()
                self._note("upstream_transport", level="info", transport=self.remote.transport,
                           why=f"the URL answered a POST with HTTP {response.status}: a 2024-11-05 SSE endpoint")
                await self._exchange(frame, first, call_id, lasting=lasting)
                return
            if first and self._first is not None and not self._first.done():
                self._first.set_result(None)
            if response.status == 404 and not retried and await self._reopened(sent):
                response.release()
                await self._exchange(frame, first, call_id, retried=True, lasting=lasting)
                return
            try:
                await self._answer(frame, response, call_id, deadline, lasting)
            except FAILURES as exc:
                self._gone(frame, exc, call_id)
        if first and self.remote.listens and self._stream is None and not self._closing:
            self._stream = self._spawn(self._listen())

    async def _answer(self, frame: bytes, response: aiohttp.ClientResponse, call_id: Any, deadline: float,
                      lasting: bool = False) -> None:
        """``response`` through the flow: a JSON body whole by ``deadline``, a stream event by event,
        each within the upstream timeout of the one before."""
        ctype = response.headers.get("content-type", "")
        if response.status >= 300:
            said = None
            if "json" in ctype and call_id is None:  # a JSON-RPC error for the request, as servers send with 4xx
                async with asyncio.timeout_at(deadline):
                    data = await read_answer(response, Holding(self.budget), self.limits, release=True)
                # (through the era bridge: the POST's requests, the bridge's own among them)
                said = _unnamed_error(data) if self.eras is not None or self._awaits(frame) else None
                if said is None:
                    self._feed(data)
            self._gone(frame, Refused.status(response), call_id, said)
            return
        streamed = "text/event-stream" in ctype
        if streamed:
            resume = Resume()
            await self._relay(response, resume, None if lasting else self.timeout)
            await self._resume(frame, resume)
        elif "json" in ctype:
            async with asyncio.timeout_at(deadline):
                data = await read_answer(response, Holding(self.budget), self.limits, release=True)
            if data.strip():
                self._feed(data)
        if self.remote.legacy:  # the answer comes on the one stream, by the same deadline
            if call_id is None and self._awaits(frame):
                asyncio.get_running_loop().call_at(deadline, self._overdue, frame)
        elif self._awaits(frame):  # a 202, or a stream that ended unanswered
            self._gone(frame, Refused("ended its event stream before the response" if streamed else
                                      f"answered HTTP {response.status} without a response to the request"))

    async def _relay(self, response: aiohttp.ClientResponse, resume: Resume, idle: float | None = None) -> int:
        """Every message of an SSE answer through the flow, as it comes; returns how many events came."""
        seen = 0
        async for event in events(self._chunks(response, idle), self.limits.max_event_bytes):
            seen += 1
            resume.saw(event)
            if event.data is not None and event.data.strip():
                self._feed(event.data)
        return seen

    async def _resume(self, frame: bytes, resume: Resume) -> None:
        """A POST's stream ended before its answer: GET it again from its last event (SEP-1699)."""
        tries = 0
        while resume.last_id is not None and self._awaits(frame) and tries < MAX_RESUMES and not self._closing:
            await asyncio.sleep(resume.retry_s)  # as long as the server asked clients to wait
            try:
                async with self._get(resume) as response:
                    if response.status != 200 or "text/event-stream" not in response.headers.get("content-type", ""):
                        return
                    tries = 0 if await self._relay(response, resume, self.timeout) else tries + 1
            except FAILURES:
                tries += 1

    async def _reopened(self, sent: str | None) -> bool:
        """The server answered 404 to a request that carried the session ``sent``: it lost it (it
        restarted, or forgot it). True once the session is open again (this request's doing, or
        another's that met the same 404): the request may go again. False when it cannot be."""
        if self._closing:
            return False
        if self.remote.lost(sent):
            self._reopening = self._spawn(self._reopen())
        elif sent is None or self._reopening is None or sent == self.remote.session_id:
            return False
        return await asyncio.shield(self._reopening)

    async def _reopen(self) -> bool:
        """A new session for the host's: its `initialize` and `notifications/initialized` again, as
        they were POSTed (the server's answers are the host's already, and are not relayed), then
        the new session's GET stream. Said in the log either way."""
        assert self.client is not None
        if self._stream is not None:
            self._stream.cancel()  # the lost session's stream
            self._stream = None
        try:
            for n, frame in enumerate(self.remote.opening):
                async with asyncio.timeout(self.timeout):
                    response = await self.client.post(  # `initialize` without the version it settles
                        self.remote.post_url(), data=frame, headers=self.remote.headers(
                            self._mirrored(frame) if n else None), allow_redirects=False)
                    async with response:
                        self.remote.answered(response.status, response.headers, False)
                        await read_answer(response, Holding(self.budget), self.limits, release=True)
                if response.status >= 300:
                    raise Refused.status(response)
                if self.remote.session_id is None:
                    raise Refused("answered initialize without a session")
        except (*FAILURES, Refused) as exc:
            if not self._session_lost:
                self._session_lost = True
                self._note("upstream_session_lost", why="the server no longer knows the session (HTTP 404) and "
                           f"initialize sent again failed ({self.shown(cause(self._timed(exc)))}): every request "
                           "fails until the host starts the server again")
            return False
        self._note("upstream_session_reopened", why="the server no longer knew the session (HTTP 404): the "
                   "host's initialize went again, for a new session; the request that found it goes again")
        if self.remote.listens and not self._closing:
            self._stream = self._spawn(self._listen())
        return True

    def _get(self, resume: Resume | None = None) -> Any:
        assert self.client is not None
        return self.client.get(self.remote.url, allow_redirects=False, headers=self.remote.headers(
            self._mirrored(), stream=True, last_event_id=resume.last_id if resume is not None else None))

    async def _listen(self) -> None:
        """The GET stream of the server's own messages (notifications, requests to the host),
        resumed from its last event when it breaks; a 405 says the server has none."""
        resume = Resume()
        tries = 0
        while tries < MAX_RESUMES and not self._closing:
            try:
                async with self._get(resume) as response:
                    if response.status == 405:
                        self._note("upstream_stream", level="info", why="the server offers no GET stream (405)")
                        return
                    if response.status >= 300 or "text/event-stream" not in response.headers.get("content-type", ""):
                        self._note("upstream_stream_refused", why=f"the server answered its GET stream with HTTP "
                                   f"{response.status}; its own messages reach the host only on answers")
                        return
                    tries = 0 if await self._relay(response, resume) else tries + 1
            except FAILURES as exc:
                tries += 1
                self._note("upstream_stream_broken", level="info", why=self.shown(cause(exc)))
            if not self._closing:
                await asyncio.sleep(resume.retry_s)
        if not self._closing:
            self._note("upstream_stream_lost", why=f"the GET stream broke {MAX_RESUMES} times in a row; the "
                       "server's own messages reach the host only on answers")

    async def _open_legacy(self) -> None:
        """2024-11-05: open the stream (once; every POST waits for it) and wait for its endpoint."""
        if self._endpoint is None:
            self._endpoint = asyncio.get_running_loop().create_future()
            self._stream = self._spawn(self._legacy(self._endpoint))
        await asyncio.shield(self._endpoint)

    async def _legacy(self, endpoint: asyncio.Future[None]) -> None:
        """The 2024-11-05 stream: its `endpoint` event first, then every answer and message of the
        server. When it ends, so has the session: whatever waits gets an error."""
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._get()
            async with response:
                if response.status >= 300:
                    raise Refused.status(response)
                async for event in events(self._chunks(response), self.limits.max_event_bytes):
                    if not endpoint.done():
                        if self.remote.endpoint_from(event):
                            endpoint.set_result(None)
                    elif event.data is not None and event.data.strip():
                        self._feed(event.data)
            raise Refused("ended its event stream (a 2024-11-05 session ends with it)")
        except (*FAILURES, Refused) as exc:
            if not endpoint.done():
                endpoint.set_exception(exc)
                return
            if not self._closing:
                self._gone(None, exc)

    # -- toward the host -----------------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        """One message from the upstream, as the line a child would have written."""
        self._route(one_line(data) + b"\n", False)

    def _awaits(self, frame: bytes) -> bool:
        return self.flow is not None and self.flow.awaits(frame) and not (self.eras is not None
                                                                          and self.eras.carried(frame))

    def _stopped(self, frame: bytes | None, call_id: Any = None) -> None:
        """The proxy stops (the host's goodbye, a signal) before the upstream answered ``frame`` (None:
        anything): what MCP's SDKs answer a request with when the connection closes under it."""
        if self.flow is None or self._host_gone:
            return
        error = error_response(call_id, CONNECTION_CLOSED, "Connection closed: reminder-bridge stopped before "
                               f"{self.target.shown} answered", {"upstream": self.target.shown})
        if call_id is not None:
            self._feed(dumps(error))
            return
        for reply in self.flow.upstream_gone(error["error"], frame):
            self._write(reply.data + b"\n", to_host=True)

    def _gone(self, frame: bytes | None, exc: BaseException, call_id: Any = None,
              said: dict[str, Any] | None = None) -> None:
        """The upstream cannot answer ``frame`` (None: anything): each of its requests still waiting
        gets the JSON-RPC error that says why (``said``: the server's own), the upstream's secrets
        never in it; the proxy's own request (``call_id``) gets it as its answer, through the flow
        that asked."""
        exc = self._timed(exc)
        self.recorder.log("upstream_error", why=self.shown(cause(exc)), url=self.target.shown)
        if self.flow is None or self._host_gone:
            return
        if call_id is not None:
            self._feed(dumps(upstream_error(self, call_id, exc)))
            return
        error = said or upstream_error(self, None, exc)["error"]
        if self.eras is not None and frame is not None:  # as the server's answer: the bridge's own requests wait too
            back = self._bridged(self.eras.failed(frame, error))
            if back:
                self._route(back, from_host=False, bridged=True)
            return
        for reply in self.flow.upstream_gone(error, frame):
            self._write(reply.data + b"\n", to_host=True)

    def _overdue(self, frame: bytes) -> None:
        """A 2024-11-05 request's deadline: unanswered on the stream by then, it gets the timeout's error."""
        if self._awaits(frame) and not self._closing:
            self._gone(frame, TimeoutError())

    def _timed(self, exc: BaseException) -> BaseException:
        """A timeout as the upstream timeout's own (an error that names it), any other ``exc`` as it is."""
        return TimedOut(self.timeout, "--upstream-timeout") if isinstance(exc, TimeoutError) else exc


def _unnamed_error(data: bytes) -> dict[str, Any] | None:
    """The error of a JSON-RPC error response with a null id (a server refusing a POST before it
    read the request's id, as the SDKs do with 400): the answer to the request the POST carried,
    as a host talking to the server direct takes it."""
    try:
        msg = loads(data)
    except ValueError:
        return None
    if isinstance(msg, dict) and "id" in msg and msg["id"] is None and isinstance(msg.get("error"), dict):
        return msg["error"]
    return None
