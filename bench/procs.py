"""Start the proxy and peers as real processes on loopback, and measure them from outside."""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PY = sys.executable


def bridge(*args: str) -> list[str]:
    """The command line of `reminder-bridge ARGS` as the bench runs it (on the loop that
    `REMINDER_BRIDGE_LOOP` and the installed extras choose, as the proxy itself does)."""
    return [PY, "-m", "bridge", *args]


def relay_http(upstream: str) -> list[str]:
    """A bare aiohttp reverse proxy (bench/http_relay.py) in front of ``upstream``, on the proxy's loop."""
    return [PY, "-m", "bench.http_relay", upstream]


def relay(*args: str) -> list[str]:
    """The bare asyncio relay (bench/relay.py) around ``args``, on the loop `stdio` runs on."""
    return [PY, "-m", "bench.relay", *args]


def on_loop(loop: str | None) -> dict[str, str]:
    """The environment for a process on ``loop`` (`asyncio`, `uvloop`, None: as configured)."""
    return {**os.environ, "REMINDER_BRIDGE_LOOP": loop} if loop else dict(os.environ)


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and all its descendants still running (`serve --workers`)."""
    return sum(cpu_seconds(p) for p in descendants(pid))


class Process:
    """A background process that announces its port (`PORT <n>` on stdout, or the proxy's
    `{"event": "listening", …}` line on stderr), or is told it (``port``: what other programs'
    command lines say; their output is dropped)."""

    def __init__(self, argv: list[str], port_from: str | None = "stdout", port: int = 0, **popen):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE if port_from == "stdout" else
                                     subprocess.DEVNULL if port else None,
                                     stderr=subprocess.PIPE if port_from == "stderr" else subprocess.DEVNULL,
                                     **popen)
        self.port = self._wait_port(port_from) if port_from else port
        if self.port:
            self._wait_listening()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_port(self, port_from: str) -> int:
        stream = self.proc.stdout if port_from == "stdout" else self.proc.stderr
        found: list[int] = []
        seen: list[str] = []
        ready = threading.Event()

        def read() -> None:
            for raw in stream:
                line = raw.decode(errors="replace").strip()
                if not found:
                    seen.append(line)
                    port = _port_in(line)
                    if port:
                        found.append(port)
                        ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(30)
        if not found:
            self.stop()
            raise RuntimeError(f"{' '.join(self.argv[:6])} did not start: {' | '.join(seen)[-1500:]}")
        return found[0]

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 60  # some peers import a great deal before they listen
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{' '.join(self.argv[:6])} exited with {self.proc.returncode} before listening")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"{self.argv[:6]} never accepted connections on {self.port}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *_) -> None:
        self.stop()


def _port_in(line: str) -> int | None:
    if line.startswith("PORT "):
        return int(line.split()[1])
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if record.get("event") == "listening":
            return int(record["listen"].rsplit(":", 1)[1])
    return None


def proxy_serve(*args: str, **popen) -> Process:
    return Process(bridge("serve", "--listen", "127.0.0.1:0", *args), "stderr", **popen)


def peer(kind: str) -> Process:
    return Process([PY, "-m", "bench.peers", kind], "stdout")


def rss_kib(pid: int) -> int:
    return _status(pid, "VmRSS")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it still running."""
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return [pid]
    return [pid, *(d for child in children for d in descendants(int(child)))]


def command_line(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def reaped_cpu_seconds(pid: int) -> float:
    """CPU of the children ``pid`` has waited for (cutime + cstime): processes it started and that
    ended, e.g. a server started for one request."""
    return _cpu(pid, 13)


def _status(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (Linux /proc)."""
    return _cpu(pid, 11)


def _cpu(pid: int, at: int) -> float:
    """Two CPU fields of /proc/PID/stat from ``at`` (after the command name), added, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[at]) + int(fields[at + 1])) / os.sysconf("SC_CLK_TCK")


def has_proc() -> bool:
    return os.path.exists("/proc/self/status")


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (0 < q < 1) of ``samples``."""
    if len(samples) < 2:
        return samples[0] if samples else float("nan")
    return statistics.quantiles(samples, n=1000, method="inclusive")[min(998, max(0, int(q * 1000) - 1))]
