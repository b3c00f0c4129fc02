"""The stdio servers `serve` runs for a route with a `command` (docs/http.md, "A stdio server behind
serve"): each child started with `bridge.transports.child.start`, on the loop with `attach`, its
stdout cut into lines by the stdio transport's `Framer`, and stopped with `child.stop` (EOF,
SIGTERM, SIGKILL after a grace) in a thread of its own, so the loop never waits on a process.

`Children` bounds how many run at once per route (`max_children`): one more is refused, never
queued.  A `Child` knows lines and bytes only; who reads its lines is its owner's business.  On a
route that names its server's MCP era, the era bridge (`bridge.pipeline.eras`) sits in front of the
child's pipes: what is written to it goes through `toward_server`, what it writes through
`from_server`, and what the bridge answers in the server's place comes up as the child's lines.
"""
from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

from bridge.pipeline.commands import HOST, PEER
from bridge.pipeline.era_layer import EraLayer
from bridge.transports import child as processes
from bridge.transports.child import ChildTransport, attach
from bridge.transports.driver import Timer, era_commands
from bridge.transports.stdio import MAX_LINE, PIPE_READ, Framer, closed_error

#: Seconds a child gets after SIGTERM (its stdin closed first) before SIGKILL.
STOP_GRACE = 2.0


class Full(Exception):
    """The route runs as many children as it may (`max_children`)."""


class Child:
    """One stdio server on the loop: ``lines(block)`` gets each block of whole lines it writes,
    ``oversize(head)`` the first bytes of a line over the limit, ``gone(error)`` the JSON-RPC error
    its unanswered requests get once it exits or closes its stdout."""

    def __init__(self, command: list[str], lines: Callable[[bytes], None], oversize: Callable[[bytes], None],
                 gone: Callable[[dict[str, Any]], None], max_line: int = MAX_LINE, bridge: EraLayer | None = None):
        self.command = command
        self.lines = lines
        self.bridge = bridge
        self.timer = Timer(bridge.clock, lambda now: self._bridged(bridge.wake(now))) if bridge is not None else None
        self.framer = Framer(max_line, lines if bridge is None else self._from_server, oversize)
        self.gone = gone
        self.transport: ChildTransport | None = None
        self.proc: Any = None
        #: set while its stdin takes more (the pipe's buffer is under its high-water mark)
        self.writable = asyncio.Event()
        self.writable.set()
        self.ended = asyncio.get_running_loop().create_future()  # its exit code, once reaped
        self._reported = False
        self._stdout_closed = False
        self._paused: set[object] = set()  # who holds its stdout unread (owners with a full queue)
        self.stopping = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def start(self, env: dict[str, str] | None, cwd: str | None) -> None:
        """Spawn and attach it; OSError as `child.start` raises it."""
        self.proc = processes.start(self.command, env=env, cwd=cwd, forward_signals=False)
        self.transport, _ = await attach(self.proc, lambda: self)
        out = self.transport.get_pipe_transport(1)
        if out is not None and hasattr(out, "max_size"):
            out.max_size = PIPE_READ

    # -- asyncio.SubprocessProtocol ----------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        pass

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.framer.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.framer.eof()
            self._stdout_closed = True
            if self.ended.done():
                self._report(self.ended.result())
            else:  # it can answer nothing more: it is stopped, and its exit tells how it ended
                self.stop()
        elif fd == 0:
            self.writable.set()  # what is still written is dropped: nobody waits on it

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def process_exited(self) -> None:
        """Told once its output is all read (what it wrote before it exited is answered first),
        or STOP_GRACE later if a process it left behind holds its stdout open."""
        code = self.transport.get_returncode() if self.transport is not None else None
        if not self.ended.done():
            self.ended.set_result(code)
        if self._stdout_closed:
            self._report(code)
        else:
            asyncio.get_running_loop().call_later(STOP_GRACE, self._report, code)

    def _report(self, code: int | None) -> None:
        """The child can answer nothing more: told once (stdout closed, or exited)."""
        if not self._reported:
            self._reported = True
            self.gone(closed_error(os.path.basename(self.command[0]), code))

    # -- bytes -----------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self._reported and not self.stopping

    def write(self, data: bytes) -> bool:
        """``data`` (whole lines) to its stdin; False when it takes nothing any more."""
        stdin = self.transport.get_pipe_transport(0) if self.transport is not None else None
        if stdin is None or stdin.is_closing() or not self.alive:
            return False
        if self.bridge is None:
            stdin.write(data)
        else:
            self._bridged(self.bridge.toward_server(data))
        return True

    def _from_server(self, block: bytes) -> None:
        self._bridged(self.bridge.from_server(block))  # type: ignore[union-attr]  # (set with this reader)

    def _bridged(self, writes: list[Any]) -> None:
        """The era bridge's writes: the server's to its stdin, the rest up as lines it wrote; its
        timers to its own."""
        assert self.timer is not None
        writes = era_commands(self.bridge, writes, self.timer)
        stdin = self.transport.get_pipe_transport(0) if self.transport is not None else None
        down = [w.data for w in writes if w.to == PEER]
        if down and stdin is not None and not stdin.is_closing():
            stdin.write(b"\n".join(down) + b"\n")
        up = [w.data for w in writes if w.to == HOST]
        if up:
            self.lines(b"\n".join(up) + b"\n")

    def hold(self, owner: object, held: bool) -> None:
        """Stop reading its stdout while any owner's queue toward a host is full (the child then
        blocks on its own writes: nothing grows here)."""
        before = bool(self._paused)
        self._paused.add(owner) if held else self._paused.discard(owner)
        out = self.transport.get_pipe_transport(1) if self.transport is not None else None
        if out is not None and before != bool(self._paused):
            out.pause_reading() if self._paused else out.resume_reading()

    def stop(self, grace: float = STOP_GRACE) -> asyncio.Future[Any]:
        """EOF on its stdin, SIGTERM, SIGKILL ``grace`` seconds later (`child.stop`, in a thread);
        the future is done once it is reaped."""
        if self.timer is not None:
            self.timer.close()
        if not self.stopping and self.proc is not None:
            self.stopping = True
            if self.transport is not None:  # the loop lets go of the pipes first (they close on its next turn)
                for fd, pipe in self.transport.pipes.items():
                    pipe.abort() if fd == 0 else pipe.close()  # stdin: what it has not read is dropped
            thread = threading.Thread(target=processes.stop, args=(self.proc, grace), name=f"stop-{self.proc.pid}",
                                      daemon=True)
            asyncio.get_running_loop().call_soon(thread.start)
        return self.ended


class Children:
    """A route's running children: at most ``limit``, each counted from its start to its reaping."""

    def __init__(self, limit: int, grace: float = STOP_GRACE):
        self.limit = limit
        self.grace = grace
        self.running: set[Child] = set()

    def reserve(self) -> None:
        if len(self.running) >= self.limit:
            raise Full(f"this route runs {self.limit} stdio servers already (max_children)")

    async def start(self, child: Child, env: dict[str, str] | None, cwd: str | None) -> Child:
        """Start ``child`` if the route may run one more (else `Full`)."""
        self.reserve()
        self.running.add(child)
        child.ended.add_done_callback(lambda _: self.running.discard(child))
        try:
            await child.start(env, cwd)
        except OSError:
            self.running.discard(child)
            raise
        return child

    async def stop_all(self) -> None:
        """Every child stopped at once, each within its grace, and reaped."""
        ended = [child.stop(self.grace) for child in list(self.running)]
        if ended:
            await asyncio.gather(*ended, return_exceptions=True)
