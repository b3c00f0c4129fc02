"""The child a stdio proxy wraps, started before the proxy has loaded its pipeline.

Hosts start every configured server at launch and send `initialize` at once, so the server's own
start-up is what a host waits for first. `start` spawns the child with nothing but `subprocess`
imported; the proxy's imports then run while the child starts, and `attach` hands the child to the
event loop as the transport an `asyncio.SubprocessProtocol` expects (`loop.subprocess_exec` can
only spawn a child of its own, after the loop runs).
"""
from __future__ import annotations

import signal
import subprocess
import threading
from typing import Any


def start(command: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
          forward_signals: bool = True) -> subprocess.Popen:
    """Spawn ``command`` with pipes on stdin and stdout, stderr inherited (it reaches the host
    untouched), in ``env`` and ``cwd`` (None: ours). Raises OSError as `subprocess.Popen` does
    (see `cannot_start`).

    From then on SIGINT and SIGTERM go on to the child, as they do once the proxy runs
    (`StdioProxy.run` installs the loop's handlers in place of these): a host that stops the proxy
    while it is still starting stops its server too, and the proxy ends as the child does. Not
    with ``forward_signals`` False: `serve` runs many children and stops them itself (`stop`)."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, bufsize=0,
                            env=env, cwd=cwd)
    if not forward_signals:
        return proc

    def forward(signum: int, _: Any) -> None:
        _noted.add(signum)
        proc.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    return proc


#: The signals forwarded while the proxy was still starting (signals are per process, as this is).
_noted: set[int] = set()


def noted_while_starting() -> frozenset[int]:
    """What `start`'s handlers forwarded before `StdioProxy.run` took over: a SIGTERM among them
    still starts the drain grace, or a child that ignores it would keep the proxy for ever."""
    return frozenset(_noted)


def cannot_start(command: list[str], exc: OSError) -> tuple[str, int]:
    """What to tell the host about a child that would not start, and the exit code: 127 for a
    command not found, 126 for one that cannot be run (as a shell says)."""
    return (f"reminder-bridge: cannot start {command[0]!r}: {exc.strerror or exc}\n",
            127 if isinstance(exc, FileNotFoundError) else 126)


def stop(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """End a child the proxy will not serve after all (its configuration was refused): EOF on its
    stdin as MCP's stdio shutdown says, SIGTERM, then SIGKILL after ``grace`` seconds."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    try:
        proc.terminate()
        proc.wait(grace)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Pipe:
    """One of the child's pipes on the loop: tells the subprocess protocol what it hears."""

    def __init__(self, child: "ChildTransport", fd: int):
        self.child, self.fd = child, fd

    def connection_made(self, transport: Any) -> None:
        pass

    def data_received(self, data: bytes) -> None:
        self.child.protocol.pipe_data_received(self.fd, data)

    def eof_received(self) -> None:
        pass  # the transport closes: connection_lost follows

    def pause_writing(self) -> None:
        self.child.protocol.pause_writing()

    def resume_writing(self) -> None:
        self.child.protocol.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.child.protocol.pipe_connection_lost(self.fd, exc)


class ChildTransport:
    """An already running `subprocess.Popen` as the part of `asyncio.SubprocessTransport` the stdio
    proxy uses: its stdin and stdout as loop pipe transports, its exit reported on the loop (a
    thread waits on it, as asyncio's own child watcher does), on asyncio and uvloop alike."""

    def __init__(self, proc: subprocess.Popen, protocol: Any):
        self.proc, self.protocol = proc, protocol
        self.pipes: dict[int, Any] = {}
        self.returncode: int | None = None
        self.closed = False

    def get_pid(self) -> int:
        return self.proc.pid

    def get_returncode(self) -> int | None:
        return self.returncode

    def get_pipe_transport(self, fd: int) -> Any:
        return self.pipes.get(fd)

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def close(self) -> None:
        """Close the pipes; a child still running is killed (as asyncio's transport does)."""
        if self.closed:
            return
        self.closed = True
        for pipe in self.pipes.values():
            pipe.close()
        if self.returncode is None and self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass

    def _exited(self, code: int) -> None:
        self.returncode = code
        self.protocol.process_exited()


async def attach(proc: subprocess.Popen, protocol_factory: Any) -> tuple[ChildTransport, Any]:
    """``proc`` on the running loop, with a protocol from ``protocol_factory`` (as
    `loop.subprocess_exec` returns them)."""
    import asyncio

    loop = asyncio.get_running_loop()
    protocol = protocol_factory()
    child = ChildTransport(proc, protocol)
    child.pipes[0], _ = await loop.connect_write_pipe(lambda: _Pipe(child, 0), proc.stdin)
    child.pipes[1], _ = await loop.connect_read_pipe(lambda: _Pipe(child, 1), proc.stdout)
    protocol.connection_made(child)

    def wait() -> None:
        code = proc.wait()
        try:
            loop.call_soon_threadsafe(child._exited, code)
        except RuntimeError:  # the loop is closed: nobody is waiting for the exit any more
            pass

    threading.Thread(target=wait, name=f"wait-{proc.pid}", daemon=True).start()
    return child, protocol
