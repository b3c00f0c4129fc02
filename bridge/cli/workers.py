"""`serve --workers N`: N full proxies on one port, each its own process, under a supervisor that
forwards signals to them and exits when they do.

Why processes: one proxy is bound to one core by the GIL; with SO_REUSEPORT the kernel spreads new
connections over the N listening sockets. Why shared state first: budgets, queued reminders and MCP
sessions live where `[state]` says; in memory each worker would keep its own.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from typing import NamedTuple

from bridge.state.settings import StateSettings

#: Set in a worker's environment: "INDEX:PORT:FD" (FD: where it says it is listening).
ENV = "REMINDER_BRIDGE_WORKER"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Worker(NamedTuple):
    """This process is worker ``index`` of a supervisor listening on ``port``."""

    index: int
    port: int
    fd: int

    def ready(self, listening: str) -> None:
        """Hand the `listening` line to the supervisor (which prints one for all workers)."""
        os.write(self.fd, listening.encode())
        os.close(self.fd)


def worker_of() -> Worker | None:
    value = os.environ.get(ENV)
    if not value:
        return None
    index, port, fd = (int(part) for part in value.split(":"))
    return Worker(index, port, fd)


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
    sys.stderr.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stderr.flush()


def _reserve(host: str, port: int) -> socket.socket:
    """A bound, not listening, SO_REUSEPORT socket: the port (chosen here when 0) every worker joins."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says


def supervise(argv: list[str], n: int, host: str, port: int) -> int:
    """Start ``n`` workers running ``reminder-bridge ARGV`` on one port; forward SIGTERM, SIGINT and
    SIGHUP to all. When every worker listens, print one `listening` line naming them. A worker that
    exits on its own stops the others; its exit code (1 if it was 0) becomes the supervisor's."""
    try:
        holder = _reserve(host, port)
    except OSError as exc:
        sys.stderr.write(f"reminder-bridge serve: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        return 2
    port = holder.getsockname()[1]
    procs: list[subprocess.Popen] = []
    stopping: list[int] = []  # the signal being forwarded, once the supervisor was told to stop

    def forward(signum: int, _frame: object) -> None:
        if signum != signal.SIGHUP:
            stopping.append(signum)
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    try:
        pipes = []
        for index in range(n):
            read, write = os.pipe()
            procs.append(subprocess.Popen([sys.executable, "-m", "bridge", *argv], pass_fds=(write,),
                                          env={**os.environ, ENV: f"{index}:{port}:{write}"}))
            os.close(write)
            pipes.append(read)
        lines = []
        for read in pipes:
            with os.fdopen(read, "rb") as said:
                lines.append(said.read())
        holder.close()
        if all(lines) and not stopping:
            listening = {**json.loads(lines[0]), "workers": [proc.pid for proc in procs]}
            sys.stderr.write(json.dumps(listening) + "\n")
            sys.stderr.flush()
        elif not stopping:
            forward(signal.SIGTERM, None)  # one worker could not start: the others go too
        return _wait(procs, stopping)
    except BaseException:  # the supervisor's own failure must not leave workers behind
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
        raise


def _wait(procs: list[subprocess.Popen], stopping: list[int]) -> int:
    alive = {proc.pid: proc for proc in procs}
    code = 0
    while alive:
        pid, status = os.wait()
        proc = alive.pop(pid, None)
        if proc is None:
            continue
        proc.returncode = exited = _exit_code(status)
        if not stopping:  # a worker died on its own: stop the rest, and say why we exit
            _log("worker_exited", pid=pid, code=exited, why="a worker exited on its own; stopping the others")
            stopping.append(signal.SIGTERM)
            for other in alive.values():
                other.send_signal(signal.SIGTERM)
            code = exited or 1
        elif exited and not code:
            code = exited
    return code
