"""`reminder-bridge stdio -- COMMAND`: wrap an MCP server or ACP agent that a host launches.

The host talks to us exactly as it talked to the child: newline-delimited JSON-RPC on stdin and
stdout.  Bytes are cut into lines by the proxy itself (no 64 KiB line limit), only blocks the
pipeline's pre-filter flags are split and parsed, and a full pipe pauses reading on the other
side instead of growing buffers.  The child's stderr is inherited: it reaches the host
unbuffered and untouched.
"""
from __future__ import annotations

import asyncio
import os
import selectors
import signal
import stat
import subprocess
from typing import TYPE_CHECKING, Any

from bridge.assembly import make_flow
from bridge.pipeline.commands import HOST, PEER, Command, Defer, Pause, Receipt, Wakeup, Write, receipts_of
from bridge.pipeline.flow import Flow
from bridge.pipeline.inflight import detect_protocol, oversize_reply
from bridge.policy import Policy
from bridge.telemetry import Recorder
from bridge.state.scope import STDIO, Scope
from bridge.transports.child import ChildTransport, attach, noted_while_starting
from bridge.transports.driver import FlowDriver, Timer, era_commands

if TYPE_CHECKING:
    from bridge.rules import RouteSettings

CHUNK = 256 * 1024
#: Largest read from a pipe.  asyncio asks for 256 KiB, which glibc serves by mmap and munmap on every
#: read (tens of µs per message); a Linux pipe holds 64 KiB, so a smaller read loses nothing.
PIPE_READ = 64 * 1024
MAX_LINE = 64 * 1024 * 1024
#: After SIGTERM (forwarded to the child), how long the proxy waits for the child to exit and its
#: last output to reach the host.  Then it kills the child and exits, whatever is still blocked: a
#: host that stopped reading, a child stuck writing to us or ignoring SIGTERM.
DRAIN_GRACE = 3.0
#: After the host's goodbye (EOF on stdin: the child's stdin is closed) or its going away (our
#: stdout broken), how long a child may keep running before it gets SIGTERM, as in MCP's stdio
#: shutdown.  While the host is still there, a child that is still writing, still has input to
#: read, or waits for the host to read its output gets this long again.
STOP_GRACE = 2.0
#: ... and how long after that SIGTERM it gets SIGKILL.
KILL_GRACE = 2.0
#: What MCP's SDKs answer a request with when the connection closes under it.
CONNECTION_CLOSED = -32000
#: While bytes that deliver an outbox event wait in the host pipe's buffer, how often to look again.
FLUSH_CHECK_S = 0.005


def closed_error(command: str, code: int | None) -> dict[str, Any]:
    """What a request the child never answered gets once it is gone: MCP's SDKs' "connection
    closed", naming the command and how it ended (its exit code or signal)."""
    if code is None:
        how = "closed its output"
        data: dict[str, Any] = {"command": command}
    elif code >= 0:
        how = f"exited with code {code}"
        data = {"command": command, "exitCode": code}
    else:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"was killed by {name}"
        data = {"command": command, "signal": name}
    return {"code": CONNECTION_CLOSED, "message": f"Connection closed: {command} {how} before answering (reminder-bridge)",
            "data": data}


class Framer:
    """Cuts one direction's byte stream into blocks of whole lines, with no ceiling below ``max_line``.

    Whole lines are handed on as one block per read, so ordinary traffic is scanned once per
    chunk and never split.  A longer line fails only itself: its bytes are dropped as they arrive
    (memory stays bounded) and its first bytes are reported so a request can still be answered.
    """

    def __init__(self, max_line: int, on_block, on_oversize):
        self.max_line = max_line
        self.on_block = on_block
        self.on_oversize = on_oversize
        self.partial = bytearray()
        self.discarding: bytes | None = None

    def feed(self, chunk: bytes) -> None:
        if len(chunk) > self.max_line:  # only with a limit below the pipe's read size (tests)
            for start in range(0, len(chunk), self.max_line):
                self._feed(chunk[start:start + self.max_line])
        else:
            self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        if self.discarding is not None:
            newline = chunk.find(b"\n")
            if newline < 0:
                return
            self.on_oversize(self.discarding)
            self.discarding = None
            chunk = chunk[newline + 1:]
        last = chunk.rfind(b"\n")
        if last < 0:
            self._keep(chunk)
            return
        if self.partial:
            first = chunk.find(b"\n")
            if len(self.partial) + first > self.max_line:
                self.on_oversize(bytes(self.partial[:4096]))
                self.partial.clear()
                block = chunk[first + 1:last + 1]
            else:
                self.partial += chunk[:last + 1]
                block = bytes(self.partial)
                self.partial.clear()
        else:
            block = chunk[:last + 1]
        if block:
            self.on_block(block)
        self._keep(chunk[last + 1:])

    def _keep(self, rest: bytes) -> None:
        if not rest:
            return
        if len(self.partial) + len(rest) > self.max_line:
            kept = len(self.partial)  # the first bytes, without copying a line of up to max_line
            self.discarding = bytes(self.partial[:4096]) + rest[:max(0, 4096 - kept)]
            self.partial.clear()
        else:
            self.partial += rest

    def eof(self) -> None:
        """A last line without a newline still goes on, as it came."""
        if self.partial:
            tail = bytes(self.partial)
            self.partial.clear()
            self.on_block(tail)
        elif self.discarding is not None:
            self.on_oversize(self.discarding)
            self.discarding = None


def _read_at_most(transport: asyncio.BaseTransport | None, size: int) -> None:
    """Cap an asyncio read-pipe transport's read size (its `max_size`; sockets have no such knob)."""
    if transport is not None and hasattr(transport, "max_size"):
        transport.max_size = size


def _is_stream(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _pollable(fd: int) -> bool:
    """Whether the event loop can watch `fd`: epoll refuses some character devices (/dev/null)."""
    try:
        with selectors.DefaultSelector() as probe:
            probe.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    return True


def _abort(transport: asyncio.WriteTransport | None) -> None:
    """Close a write pipe now, dropping what it has not written; also one that is still flushing
    after close() (but not one already lost, which asyncio would report twice)."""
    if transport is not None and (not transport.is_closing() or transport.get_write_buffer_size()):
        transport.abort()


class _Discard:
    """Where one side's bytes go once they can reach nobody (the host is gone)."""

    @staticmethod
    def feed(chunk: bytes) -> None:
        pass

    @staticmethod
    def eof() -> None:
        pass


class _Sink(asyncio.Protocol):
    """Write side of a pipe: tells the proxy when to stop and resume reading the other side, and
    when the reader has gone away."""

    def __init__(self, on_pause, on_resume, on_lost):
        self.on_pause, self.on_resume, self.on_lost = on_pause, on_resume, on_lost
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self.on_pause()

    def resume_writing(self) -> None:
        self.on_resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self.on_lost()


class _Source(asyncio.Protocol):
    """Read side of a pipe."""

    def __init__(self, on_data, on_eof):
        self.data_received, self._on_eof = on_data, on_eof

    def eof_received(self) -> bool:
        self._on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


class _Child(asyncio.SubprocessProtocol):
    def __init__(self, proxy: "StdioProxy"):
        self.proxy = proxy

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        proxy = self.proxy
        proxy.child_spoke = True
        proxy.child_framer.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.proxy.child_stdout_closed()
        elif fd == 0:  # what the host still sends is dropped: never leave it blocked on a pause
            self.proxy.resume_host()

    def pause_writing(self) -> None:  # the child's stdin is full: stop reading the host
        self.proxy.pause_host()

    def resume_writing(self) -> None:
        self.proxy.resume_host()

    def process_exited(self) -> None:
        self.proxy.child_exited()


class StdioProxy:
    """Relays between our stdin/stdout (the host) and a child process (the peer).

    Callback-driven (asyncio protocols, no reader tasks): a frame that needs no rewrite is
    written on as soon as it is read.  When a destination pipe is full, reading from its source
    pauses until it drains; that is the whole backpressure story and memory stays bounded.
    """

    def __init__(self, command: list[str], settings: RouteSettings, protocol: str | None,
                 recorder: Recorder, host_dialect: str | None = None, peer_dialect: str | None = None,
                 max_line: int = MAX_LINE, policy: Policy | None = None, *, started: subprocess.Popen | None):
        self.command = command
        #: the child, started by `bridge.transports.child.start` before the proxy's imports (cold start)
        self.started = started
        self.settings = settings
        self.policy = policy or Policy(settings, route=recorder.route)
        self.protocol = protocol
        self.recorder = recorder
        self.name = recorder.route
        recorder.status_source = self.status
        self.dialects = {"host_dialect": host_dialect, "peer_dialect": peer_dialect}
        self.max_line = max_line
        self.chunk = min(CHUNK, max_line)  # so a line inside one read never exceeds the limit
        self.flow: Flow | None = None
        self.driver: FlowDriver | None = None  # the flow's timers and deferred work
        #: the era bridge below the flow (`bridge.pipeline.eras`), when the route names the server's era
        self.eras: Any = None
        self._era_timer: Timer | None = None
        #: receipts of what was written toward the host but still sits in the pipe's buffer, not the
        #: pipe: reported written once the buffer is empty (a SIGKILL loses a buffer, never the pipe)
        self._unflushed: list[Receipt] = []
        self._flush_check: asyncio.TimerHandle | None = None
        #: the flow's backlog behind shared state (Redis) is long (`Pause`): neither side is read
        self._backlog_full = False
        #: each side's line cutter, or `_Discard` once what it says can reach nobody
        self.host_framer: Framer | type[_Discard] = Framer(max_line, lambda b: self._route(b, True),
                                                           lambda h: self._oversize(h, True))
        self.child_framer: Framer | type[_Discard] = Framer(max_line, lambda b: self._route(b, False),
                                                            lambda h: self._oversize(h, False))
        self.child: ChildTransport | None = None
        self._child_stdin: asyncio.WriteTransport | None = None
        self._host_reader: asyncio.ReadTransport | None = None
        self._host_writer: asyncio.WriteTransport | None = None
        self._host_sink: _Sink | None = None
        self._host_paused = asyncio.Event()
        self._finished: asyncio.Future[None] | None = None
        self._exited = False
        self._stdout_closed = False
        self._host_closed = False  # the host sent EOF: its goodbye
        self._host_gone = False  # nothing reaches the host any more: its end of our stdout is closed
        #: the child and the host's stdin are on the loop: until then a host gone waits for `run` to see it
        self._started = False
        self._child_paused = False
        #: the child wrote something since the stop timer last looked (one store per read, no allocation)
        self.child_spoke = False
        self._stop_timer: asyncio.TimerHandle | None = None  # SIGTERM, then SIGKILL, for a child outstaying
        self._drain_timer: asyncio.TimerHandle | None = None  # DRAIN_GRACE after SIGTERM

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._finished = loop.create_future()
        # the host's stdout first: the child has been running since before our imports, and what it
        # already said is relayed the moment its pipe is attached
        await self._open_host_output(loop)
        self.child, _ = await attach(self.started, lambda: _Child(self))
        self.recorder.info("child_started", pid=self.child.get_pid(), command=self.command[0])
        self._child_stdin = self.child.get_pipe_transport(0)
        _read_at_most(self.child.get_pipe_transport(1), PIPE_READ)
        await self._open_host_input(loop)
        self._started = True
        if self._host_sink is not None and self._host_sink.closed.done():  # the host went while we started
            self.host_output_lost()
        # Python-level handlers, swapped in one step for `child.start`'s: the loop's own
        # (`add_signal_handler`) arm a wakeup fd before they replace the handler, so a SIGTERM in
        # between ran both and reached the child twice (killing it during its own SIGTERM exit);
        # blocking the signals would not do, a process-directed signal goes to any other thread
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, _: loop.call_soon_threadsafe(self._forward_signal, signum))
        if signal.SIGTERM in noted_while_starting():  # already forwarded to the child while we started
            self._start_drain_grace()
        try:
            try:
                await self._finished
            finally:
                if self._stop_timer is not None:
                    self._stop_timer.cancel()
                self._stop_timers()
            code = self.child.get_returncode()
            if code is None:  # the drain grace gave up on a child that did not die of SIGKILL at once
                code = -signal.SIGKILL
            if not self._host_gone and (not self._host_closed or code != 0):
                # the child died under the host, or failed after goodbye
                if self.flow is not None:
                    for reply in self.flow.upstream_gone(closed_error(os.path.basename(self.command[0]), code)):
                        self._write(reply.data + b"\n", to_host=True)
            if self._host_writer is not None and self._host_sink is not None:
                self._host_writer.close()  # flushes what is still buffered for the host (SIGTERM: within the grace)
                await self._host_sink.closed
        finally:
            if self._drain_timer is not None:
                self._drain_timer.cancel()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.child.close()
        self._note("child_exited", level="info", code=code)
        return code if code >= 0 else 128 - code

    async def _open_host_output(self, loop: asyncio.AbstractEventLoop) -> None:
        if _is_stream(1):
            self._host_sink = _Sink(self.pause_child, self.resume_child, self.host_output_lost)
            self._host_writer, _ = await loop.connect_write_pipe(lambda: self._host_sink,
                                                                 os.fdopen(1, "wb", 0, closefd=False))

    async def _open_host_input(self, loop: asyncio.AbstractEventLoop) -> None:
        if _is_stream(0) and _pollable(0):
            self._host_reader, _ = await loop.connect_read_pipe(
                lambda: _Source(self.host_framer.feed, self._host_eof), os.fdopen(0, "rb", 0, closefd=False))
            _read_at_most(self._host_reader, PIPE_READ)
        else:  # a regular file or /dev/null on stdin: the loop cannot watch those, so read it in a thread
            asyncio.ensure_future(self._read_file(loop))

    async def _read_file(self, loop: asyncio.AbstractEventLoop) -> None:
        while data := await loop.run_in_executor(None, os.read, 0, self.chunk):
            self.host_framer.feed(data)
            while self._host_paused.is_set():
                await asyncio.sleep(0.001)
        self._host_eof()

    def _host_eof(self) -> None:
        """EOF from the host: close the child's stdin, which is how MCP and ACP hosts say goodbye,
        and stop a child that does not take the hint."""
        if self._host_closed:  # eof_received, then connection_lost
            return
        self._host_closed = True
        self.host_framer.eof()
        self._stop_child(abort=False)

    def host_output_lost(self) -> None:
        """The host closed its end of our stdout (EPIPE, or it died): nothing reaches it any more.
        Keep reading the child so it is never stuck writing to us, drop what it says, and stop it."""
        if self._host_gone or not self._started or self._finished.done():
            return  # our own close at the end, already handled, or for `run` once the child is attached
        self._host_gone = True
        self.child_framer = self.host_framer = _Discard
        self.resume_child()
        if self._host_reader is not None:
            self._host_reader.close()
        self._stop_child(abort=True)
        self._maybe_finish()
        self._note("host_gone", why="the host closed its end of stdout; stopping the child")

    def _note(self, event: str, level: str = "warning", **fields: Any) -> None:
        """A log line about the proxy's own lifecycle.  stderr is often a pipe to the host too, and
        gone with it: a line that cannot be written is lost (bridge.logs), never the shutdown it reports."""
        getattr(self.recorder, level)(event, **fields)

    def _stop_child(self, abort: bool) -> None:
        """Close the child's stdin (`abort`: dropping what it has not read yet), then SIGTERM it
        after STOP_GRACE and SIGKILL it KILL_GRACE later unless it exits first."""
        if abort:
            _abort(self._child_stdin)
        elif self._child_stdin is not None and not self._child_stdin.is_closing():
            self._child_stdin.close()  # after what is still buffered for it
        if self._stop_timer is None and self.child is not None and self.child.get_returncode() is None:
            self.child_spoke = False
            self._stop_timer = asyncio.get_running_loop().call_later(STOP_GRACE, self._stop_check)

    def _stop_check(self) -> None:
        self._stop_timer = None
        child = self.child
        if child is None or child.get_returncode() is not None:
            return
        loop = asyncio.get_running_loop()
        stdin = self._child_stdin
        if not self._host_gone and (self.child_spoke or self._child_paused
                                    or (stdin is not None and stdin.get_write_buffer_size())):
            # the host is still there and the child is still working through it: give it as long again
            self.child_spoke = False
            self._stop_timer = loop.call_later(STOP_GRACE, self._stop_check)
            return
        self._signal_child(signal.SIGTERM)
        self._stop_timer = loop.call_later(KILL_GRACE, self._kill_child)
        self._note("child_stopping", signal="SIGTERM", pid=child.get_pid(),
                   why="the host is gone" if self._host_gone else
                   f"still running {STOP_GRACE:g} s after the host closed its stdin")

    def _kill_child(self) -> None:
        self._stop_timer = None
        if self.child is not None and self.child.get_returncode() is None:
            self._signal_child(signal.SIGKILL)
            self._note("child_stopping", signal="SIGKILL", pid=self.child.get_pid(),
                       why=f"still running {KILL_GRACE:g} s after SIGTERM")

    def _signal_child(self, sig: int) -> None:
        if self.child is not None and self.child.get_returncode() is None:
            try:
                self.child.send_signal(sig)
            except ProcessLookupError:  # it exited a moment ago
                pass

    def _drain_expired(self) -> None:
        """The drain grace after SIGTERM is over: end now, whatever is blocked."""
        self._drain_timer = None
        if self._finished is None:
            return
        child = self.child
        alive = child is not None and child.get_returncode() is None
        pending = self._host_writer.get_write_buffer_size() if self._host_writer is not None else 0
        self._host_gone = True
        self.child_framer = self.host_framer = _Discard
        if self._host_reader is not None:
            self._host_reader.close()
        _abort(self._child_stdin)
        _abort(self._host_writer)  # also releases run() if it is flushing its last bytes to the host
        self.resume_child()
        if alive:
            self._signal_child(signal.SIGKILL)
        self._maybe_finish()
        if not self._finished.done():  # SIGKILL is not refused; but never wait on the kernel forever
            asyncio.get_running_loop().call_later(KILL_GRACE, self._finish_now)
        self._note("drain_grace_expired", grace=DRAIN_GRACE, child_killed=alive, undelivered_bytes=pending,
                   why="still blocked after SIGTERM: the child is killed, what the host has not read is dropped")

    def _finish_now(self) -> None:
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(None)

    def child_stdout_closed(self) -> None:
        self.child_framer.eof()
        self._stdout_closed = True
        self._maybe_finish()

    def child_exited(self) -> None:
        self._exited = True
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        """Done once the child has exited and its output is all read, or nobody wants it any more
        (a grandchild may hold the child's stdout open for ever)."""
        if self._exited and (self._stdout_closed or self._host_gone) and self._finished is not None \
                and not self._finished.done():
            self._finished.set_result(None)

    def ready(self) -> bool:
        """What the admin port's /readyz says: the peer is there to answer."""
        return self.child is not None and self.child.get_returncode() is None

    def status(self) -> dict[str, Any]:
        """What the admin port's status page shows of this route (see `Recorder.status_source`)."""
        protocol = self.flow.protocol if self.flow is not None else self.protocol
        return {"transport": "stdio", "protocol": protocol, "stage": self.settings.stage, "settings": self.settings,
                "policy": self.policy, "sessions": 1 if self.flow is not None else 0}

    def refusal(self, settings: RouteSettings, after: dict[str, RouteSettings]) -> tuple[str, str] | None:
        """Nothing a stdio route reads is fixed once it runs, but its protocol (which every transport
        refuses to change). Its `command`, `env` and `cwd` were read when the child started and
        wait for the next start (a reload never restarts the child); `path` and `upstream` are
        `serve`'s."""
        return None

    def apply(self, settings: RouteSettings, policy: Policy) -> dict[str, dict[str, str]]:
        """A reload (`bridge.policy.reload.apply_reload`): new rules for the messages to come; the
        connection, learned dialects, held reminders and budget tokens stay. Nothing moves."""
        self.settings, self.policy = settings, policy
        if self.flow is not None:
            self.flow.reconfigure(settings, policy)
        return {}

    def _forward_signal(self, sig: int) -> None:
        """SIGINT and SIGTERM go on to the child, whose exit ends the proxy.  SIGTERM also starts
        the drain grace: past it, the proxy ends whatever is blocked."""
        self._signal_child(sig)
        if sig == signal.SIGTERM:
            self._start_drain_grace()

    def _start_drain_grace(self) -> None:
        if self._drain_timer is None and self._finished is not None:
            self._drain_timer = asyncio.get_running_loop().call_later(DRAIN_GRACE, self._drain_expired)

    # -- backpressure --------------------------------------------------------------------------
    def pause_host(self) -> None:
        self._host_paused.set()
        if self._host_reader is not None:
            self._host_reader.pause_reading()

    def resume_host(self) -> None:
        self._host_paused.clear()
        if self._host_reader is not None and not self._backlog_full:
            self._host_reader.resume_reading()

    def pause_child(self) -> None:
        if self._host_gone:  # what the child says is dropped now: keep it flowing
            return
        self._child_paused = True
        if self.child is not None and (stdout := self.child.get_pipe_transport(1)) is not None:
            stdout.pause_reading()

    def resume_child(self) -> None:
        self._child_paused = False
        if self.child is not None and (stdout := self.child.get_pipe_transport(1)) is not None \
                and not self._backlog_full:
            stdout.resume_reading()

    def _hold_sources(self, held: bool) -> None:
        """Stop (or restart) reading both sides while the flow's backlog behind shared state is long."""
        self._backlog_full = held
        child_out = self.child.get_pipe_transport(1) if self.child is not None else None
        if held:
            for source in (self._host_reader, child_out):
                if source is not None:
                    source.pause_reading()
            return
        if self._host_reader is not None and not self._host_paused.is_set():
            self._host_reader.resume_reading()
        if child_out is not None and not self._child_paused:
            child_out.resume_reading()

    # -- routing -------------------------------------------------------------------------------
    def _route(self, block: bytes, from_host: bool, bridged: bool = False) -> None:
        """A block of whole lines from one side: forwarded at once unless the pipeline must look
        (``bridged``: lines the era bridge wrote as the server's, which it has seen)."""
        if not from_host and self.eras is not None and not bridged:  # a 2025-11-25 server, as a 2026-07-28 one
            block = self._bridged(self.eras.from_server(block))
            if not block:
                return
        origin = HOST if from_host else PEER
        flow = self.flow
        if flow is None:
            if not from_host:
                self._write(block, to_host=True)
                return
            flow = self._start_flow(block.split(b"\n", 1)[0])
        if flow.passes_on(block, origin):  # (never while the flow waits on shared state: what comes waits in line)
            self._write(block, to_host=not from_host)
            return
        to_host: list[bytes] = []
        to_peer: list[bytes] = []
        later: list[Any] = []
        delivered: list[Receipt] = []
        lines = block.split(b"\n")
        newline = lines[-1] == b""
        if newline:
            lines.pop()
        end = b"\n" if newline else b""
        assert self.driver is not None
        for frame in lines:
            # in-process state is performed here, at once; shared state later, in order (the driver)
            outcome = self.driver.resolve(flow.from_host(frame) if from_host else flow.from_peer(frame))
            self._sort(outcome, to_host, to_peer, later)
            delivered += receipts_of(outcome)
        self._emit(to_host, to_peer, later, end)
        self._delivered(delivered)

    def _emit(self, to_host: list[bytes], to_peer: list[bytes], later: list[Any], end: bytes) -> None:
        """Write what a block's frames gave, one write per side, and hand timers to the driver."""
        if to_peer:
            self._write(b"\n".join(to_peer) + end, to_host=False)
        if to_host:
            self._write(b"\n".join(to_host) + end, to_host=True)
        if later and self.driver is not None:
            self.driver.perform(later)

    @staticmethod
    def _sort(commands: list[Command], to_host: list[bytes], to_peer: list[bytes], later: list[Any]) -> None:
        """Commands by where they go: bytes for either side; timers, blocking work and pauses for the driver."""
        for command in commands:
            if isinstance(command, Write):
                (to_host if command.to == HOST else to_peer).append(command.data)
            elif type(command) is Wakeup or type(command) is Defer or type(command) is Pause:
                later.append(command)

    def _start_flow(self, first_frame: bytes) -> Flow:
        protocol = self.protocol or detect_protocol(first_frame)
        # the one connection of the route: what it keeps (its outbox) is there again after a restart
        flow = self.flow = make_flow(protocol, self.settings, self.recorder, policy=self.policy,
                                     scope=Scope.connection(self.name, STDIO), **self.dialects)

        def write(command: Write) -> None:  # what the flow sends on its own: a released reminder, an outbox poll
            self._write(command.data + b"\n", to_host=command.to == HOST)
            self._delivered(receipts_of([command]))

        self.driver = FlowDriver(flow, write, write, self._hold_sources)
        if protocol == "mcp" and self.settings.bridged_server_era:
            from bridge.pipeline.eras import BRIDGES

            self.eras = BRIDGES[self.settings.bridged_server_era](self.settings.host_era, lambda: flow.state.era,
                                                                  self.recorder, streams=True,
                                                                  input_wait_s=self.settings.input_wait_s)
            self._era_timer = Timer(self.eras.clock, self._era_woken)
        return flow

    def _bridged(self, writes: list[Any]) -> bytes:
        """The era bridge's writes: the server's at once; the flow's (lines as the server would have
        sent them) returned for it to take; its timers to its own."""
        writes = era_commands(self.eras, writes, self._era_timer)
        up = [w.data for w in writes if w.to == HOST]
        down = [w for w in writes if w.to == PEER]
        if down:
            self._to_server(down)
        return b"\n".join(up) + b"\n" if up else b""

    def _to_server(self, writes: list[Write]) -> None:
        """What the era bridge writes toward the server, in one write."""
        self._to_peer(b"\n".join(w.data for w in writes) + b"\n")

    def _stop_timers(self) -> None:
        """The flow's and the era bridge's timers fire no more (the proxy is ending)."""
        if self.driver is not None:
            self.driver.close()
        if self._era_timer is not None:
            self._era_timer.close()

    def _era_woken(self, now: float) -> None:
        """The era bridge's timer: what it gave up goes to either side as its other writes do."""
        back = self._bridged(self.eras.wake(now))
        if back:
            self._route(back, from_host=False, bridged=True)

    def _delivered(self, receipts: tuple[Receipt, ...] | list[Receipt]) -> None:
        """What was just written toward the host delivered ``receipts``: reported once it is in the
        pipe (at once, unless the pipe's buffer holds bytes the host has not taken yet)."""
        if not receipts or self.flow is None or self.driver is None:
            return
        writer = self._host_writer
        if self._host_gone or (writer is not None and writer.is_closing()):
            self.flow.unwritten(receipts)
            return
        self._unflushed += receipts
        if self._flush_check is None:
            self._check_flushed()

    def _check_flushed(self) -> None:
        self._flush_check = None
        writer = self._host_writer
        if writer is not None and writer.get_write_buffer_size() and not writer.is_closing():
            self._flush_check = asyncio.get_running_loop().call_later(FLUSH_CHECK_S, self._check_flushed)
            return
        receipts, self._unflushed = self._unflushed, []
        if self.flow is not None and self.driver is not None and receipts:
            if self._host_gone or (writer is not None and writer.is_closing()):
                self.flow.unwritten(receipts)
            else:
                self.driver.perform(self.flow.written(receipts))

    def _oversize(self, head: bytes, from_host: bool) -> None:
        origin = HOST if from_host else PEER
        if self.flow is not None:
            replies = [c.data for c in self.flow.oversize(head, origin, self.max_line)]
        else:  # before the host's first line: no flow yet, and nothing in flight
            found = oversize_reply(head, self.max_line, from_host)
            replies = [found[1]] if found is not None else []
        self.recorder.log("oversize", side=origin, limit=self.max_line, answered=bool(replies))
        for reply in replies:
            self._write(reply + b"\n", to_host=True)

    def _write(self, data: bytes, to_host: bool) -> None:
        if not to_host and self.eras is not None:
            back = self._bridged(self.eras.toward_server(data))
            if back:  # what the bridge answered itself (discover, ping) comes up as the server's answer
                self._route(back, from_host=False, bridged=True)
            return
        if not to_host:
            self._to_peer(data)
            return
        if self._host_writer is not None:
            if not self._host_writer.is_closing():
                self._host_writer.write(data)
            return
        view = memoryview(data)  # stdout is a regular file: plain blocking writes
        while view:
            view = view[os.write(1, view):]

    def _to_peer(self, data: bytes) -> None:
        """Whole lines onto the server's own wire (here the child's stdin), past the era bridge."""
        if self._child_stdin is not None and not self._child_stdin.is_closing():
            self._child_stdin.write(data)
