"""`serve --workers N`: N full proxies on one port, each its own process, under a supervisor that
forwards signals to them, restarts one that dies, and takes them all with it when it ends.

Why processes: one proxy is bound to one core by the GIL; with SO_REUSEPORT the kernel spreads new
connections over the N listening sockets. Why shared state first: budgets, queued reminders and MCP
sessions live where `[state]` says; in memory each worker would keep its own.

How the lifecycle holds, whatever happens:

- **Workers end with their supervisor, however it ends** (a SIGKILL included: orphans would go on
  serving the port on old rules beside the next supervisor's workers). Two mechanisms, because
  neither covers everything alone. On Linux, each worker asks the kernel, between fork and exec,
  for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``): immediate, and it works while the
  worker is still importing, before any code of ours could watch anything. Everywhere, each worker
  also holds the read end of a *lifeline* pipe whose only write end is the supervisor's: when the
  supervisor is gone the pipe reads end-of-file, and the worker stops as on SIGTERM. A pipe needs no
  platform support and cannot miss a death (end-of-file stays readable); it only needs the worker's
  event loop running, which is what the signal covers. The race of a supervisor dying before the
  prctl took hold is closed by checking the parent right after it.
- **SIGHUP is safe from the first instant**: a worker starts with SIGHUP ignored (a disposition that
  survives exec) until its entry point notes it (`bridge.cli.hangup`) and its loop handles it.
- **Every exit is seen once**: the supervisor reaps its workers itself (SIGCHLD, ``waitpid`` without
  blocking) and never through `Popen.poll`/`wait`, which would reap behind its back (the old
  `os.wait` loop died with ChildProcessError that way). Each exit is logged with its pid, exit code or
  signal, and whether it is restarted.
- **A worker that dies after it was listening is restarted** (at most `MAX_RESTARTS` in
  `RESTART_WINDOW` seconds; then the set stops, so a process manager sees the failure). A worker
  of the first start that cannot start stops the set at once: that is a configuration error.
"""
from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from bridge.cli import hangup
from bridge.cli.listening import announce
from bridge.logs import WORKERS, log_event
from bridge.state.settings import StateSettings

#: Set in a worker's environment: "INDEX:PORT:READY_FD:LIFELINE_FD" (READY_FD: where it says it is
#: listening; LIFELINE_FD: reads end-of-file once the supervisor is gone).
ENV = "REMINDER_BRIDGE_WORKER"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Restarts the supervisor makes within `RESTART_WINDOW` seconds before it gives up.
MAX_RESTARTS, RESTART_WINDOW = 5, 60.0
#: Seconds workers get to stop after the supervisor forwarded SIGTERM/SIGINT (serve's own drain
#: grace is 10 s) before they are killed.
KILL_AFTER = 20.0
PR_SET_PDEATHSIG = 1


class Worker(NamedTuple):
    """This process is worker ``index`` of a supervisor listening on ``port``."""

    index: int
    port: int
    fd: int
    lifeline: int

    def ready(self, listening: str) -> None:
        """Hand the `listening` line to the supervisor (which prints one for all workers)."""
        try:
            os.write(self.fd, listening.encode())
        except BrokenPipeError:
            pass  # the supervisor is gone: the lifeline stops this worker
        os.close(self.fd)

    def watch_supervisor(self, loop: asyncio.AbstractEventLoop, gone: Callable[[], None]) -> None:
        """Call ``gone`` once the supervisor has ended, however it ended (the lifeline reads EOF;
        the supervisor never writes to it)."""
        def readable() -> None:
            try:
                data = os.read(self.lifeline, 1)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(self.lifeline)
                gone()

        loop.add_reader(self.lifeline, readable)


def worker_of() -> Worker | None:
    value = os.environ.get(ENV)
    if not value:
        return None
    index, port, fd, lifeline = (int(part) for part in value.split(":"))
    return Worker(index, port, fd, lifeline)


def refusal(state: StateSettings, n: int) -> str | None:
    """Why ``n`` workers cannot start with ``state``, and what to do about it; None when they can."""
    if not state.shared:
        return (f"--workers {n} needs shared state, and state is in memory: each worker would keep its own "
                "budgets, queued reminders and MCP sessions, so a budget of 60/min would let through 60/min per "
                "worker and a session initialised on one worker would be unknown to the next. Set "
                '[state] url = "redis://HOST:6379/0" in the rules file, or --state redis://HOST:6379/0 '
                "(pip install 'reminder-bridge[redis]'), or run one worker")
    if not hasattr(socket, "SO_REUSEPORT"):
        return f"--workers {n} needs SO_REUSEPORT, which this platform does not have"
    return None


def _log(event: str, **fields: object) -> None:
    log_event(WORKERS, {"event": event, **fields}, stamped=False)


def _reserve(host: str, port: int) -> socket.socket:
    """A bound, not listening, SO_REUSEPORT socket: the port (chosen here when 0) every worker joins,
    held for the supervisor's life so a restarted worker finds it free for the set."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def _prctl() -> Any:
    """libc's prctl on Linux (loaded here, not in the forked child), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal has no name of its own
        return f"signal {number}"


class _Child:
    """One worker process as the supervisor tracks it."""

    def __init__(self, index: int, proc: subprocess.Popen, ready_fd: int, replaces: int | None):
        self.index, self.proc, self.pid, self.replaces = index, proc, proc.pid, replaces
        self.ready_fd: int | None = ready_fd
        self.said = bytearray()
        #: its `listening` line, once it said it (None: still starting, or it never could)
        self.listening: dict[str, Any] | None = None


class Supervisor:
    """The parent of `serve --workers N` (see the module's docstring for what it guarantees)."""

    def __init__(self, argv: list[str], n: int, port: int):
        self.argv, self.n, self.port = argv, n, port
        self.children: dict[int, _Child] = {}  # by pid: the workers not reaped yet
        self.current: dict[int, _Child] = {}  # by index: the latest worker of each
        self.announced = False  # the one `listening` line for the set was printed
        self.stopping: int | None = None  # the signal the set was told to stop with
        self.code = 0
        self.restarts: deque[float] = deque()
        self.prctl = _prctl()
        self.lifeline_read, self.lifeline_write = os.pipe()  # the write end lives as long as we do
        self.done = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> int:
        self.loop = loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGCHLD, self._reap)  # before the first child: none exits unseen
        for sig in FORWARDED:
            loop.add_signal_handler(sig, self._signalled, sig)
        hangup.missed()  # a SIGHUP before the workers start needs no reload: they read the file as it is now
        try:
            for index in range(self.n):
                self._spawn(index)
            await self.done.wait()
        finally:
            for sig in (signal.SIGCHLD, *FORWARDED):
                loop.remove_signal_handler(sig)
            hangup.hold()
        return self.code

    # -- starting ----------------------------------------------------------------------------------
    def _spawn(self, index: int, replaces: int | None = None) -> _Child:
        read, write = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bridge", *self.argv], pass_fds=(write, self.lifeline_read),
                env={**os.environ, ENV: f"{index}:{self.port}:{write}:{self.lifeline_read}"},
                preexec_fn=self._in_child(os.getpid()))
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        os.set_blocking(read, False)
        child = self.children[proc.pid] = self.current[index] = _Child(index, proc, read, replaces)
        assert self.loop is not None
        self.loop.add_reader(read, self._read_ready, child)
        return child

    def _in_child(self, supervisor: int) -> Callable[[], None]:
        """What a worker does between fork and exec (no threads here: the supervisor has none)."""
        prctl = self.prctl

        def setup() -> None:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until its entry point notes SIGHUP
            if prctl is not None:
                prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != supervisor:  # it died before the request took hold: nobody would stop us
                os._exit(1)

        return setup

    def _read_ready(self, child: _Child, dead: bool = False) -> None:
        """The worker's `listening` line arrives on its pipe, then end-of-file (``dead``: it exited,
        so what the pipe holds is all it said)."""
        if child.ready_fd is None:
            return
        try:
            data = os.read(child.ready_fd, 65536)
        except BlockingIOError:
            if not dead:
                return
            data = b""
        except OSError:
            data = b""
        if data:
            child.said += data
            return
        assert self.loop is not None
        self.loop.remove_reader(child.ready_fd)
        os.close(child.ready_fd)
        child.ready_fd = None
        try:
            child.listening = json.loads(child.said) if child.said else None
        except ValueError:  # it died in the middle of saying it
            return
        if child.listening is not None:
            self._listening(child)

    def _listening(self, child: _Child) -> None:
        if self.stopping is not None:
            return
        if child.replaces is not None:
            _log("worker_restarted", index=child.index, pid=child.pid, replaces=child.replaces)
        workers = [self.current[index] for index in range(self.n) if index in self.current]
        if not self.announced and len(workers) == self.n and all(c.listening is not None for c in workers):
            self.announced = True
            announce({**workers[0].listening, "workers": [c.pid for c in workers]})  # type: ignore[dict-item]

    # -- exits -------------------------------------------------------------------------------------
    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            child = self.children.pop(pid, None)
            if child is not None:
                child.proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must never reap it again
                self._exited(child)
        if not self.children and (self.stopping is not None):
            self.done.set()

    def _exited(self, child: _Child) -> None:
        while child.ready_fd is not None:  # what it said before it died decides what its exit means
            self._read_ready(child, dead=True)
        status = child.proc.returncode
        code = 128 - status if status < 0 else status  # killed by signal N: 128 + N, as a shell says
        fields: dict[str, Any] = {"pid": child.pid, "index": child.index, "code": code,
                                  "signal": _signal_name(-status) if status < 0 else None}
        if self.stopping is not None:
            _log("worker_exited", **fields, restarted=False, why="the supervisor is stopping")
            self.code = self.code or code
            return
        serving = child.listening is not None or child.replaces is not None
        if serving and self._may_restart():
            _log("worker_exited", **fields, restarted=True,
                 why="it exited on its own; a new worker takes its place")
            try:
                self._spawn(child.index, replaces=child.pid)
                return
            except OSError as exc:  # out of processes or descriptors: the set cannot stay whole
                _log("worker_not_restarted", index=child.index, error=str(exc), why="stopping the others")
        else:
            why = (f"{MAX_RESTARTS} restarts within {RESTART_WINDOW:.0f} s; stopping the others" if serving
                   else "it exited before it was listening (it could not start); stopping the others")
            _log("worker_exited", **fields, restarted=False, why=why)
        self._stop(signal.SIGTERM)
        self.code = code or 1

    def _may_restart(self) -> bool:
        now = time.monotonic()
        while self.restarts and now - self.restarts[0] > RESTART_WINDOW:
            self.restarts.popleft()
        if len(self.restarts) >= MAX_RESTARTS:
            return False
        self.restarts.append(now)
        return True

    # -- signals -----------------------------------------------------------------------------------
    def _signalled(self, sig: int) -> None:
        if sig == signal.SIGHUP:  # a rules reload: every worker does its own
            self._send(sig)
        else:
            self._stop(sig)

    def _stop(self, sig: int) -> None:
        if self.stopping is None:
            self.stopping = sig
            assert self.loop is not None
            self.loop.call_later(KILL_AFTER, self._kill_the_rest)
        self._send(sig)
        if not self.children:
            self.done.set()

    def _send(self, sig: int) -> None:
        for pid in self.children:  # unreaped: the pid is still that worker's
            os.kill(pid, sig)

    def _kill_the_rest(self) -> None:
        for pid in list(self.children):
            _log("worker_killed", pid=pid, why=f"still running {KILL_AFTER:.0f} s after it was told to stop")
            os.kill(pid, signal.SIGKILL)


def supervise(argv: list[str], n: int, host: str, port: int) -> int:
    """Start ``n`` workers running ``reminder-bridge ARGV`` on one port; forward SIGTERM, SIGINT and
    SIGHUP to all. When every worker listens, print one `listening` line naming them. Returns the
    exit code: 0 after a clean stop, else the code of the worker that ended the set."""
    try:
        holder = _reserve(host, port)
    except OSError as exc:
        sys.stderr.write(f"reminder-bridge serve: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        return 2
    supervisor = Supervisor(argv, n, holder.getsockname()[1])
    try:
        return asyncio.run(supervisor.run())
    except BaseException:  # the supervisor's own failure must not leave workers behind
        for child in supervisor.children.values():
            child.proc.kill()
            child.proc.wait()
        raise
    finally:
        holder.close()
