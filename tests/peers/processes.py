"""Start real servers and the proxy on loopback for tests, and stop them afterwards."""
from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import aiohttp


class Running:
    """A background process that announced its port; stderr is kept for failure messages."""

    def __init__(self, argv: list[str], port_from: str, env: dict[str, str] | None = None, **popen: Any):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, **popen)
        self.stderr: list[str] = []
        #: what it printed on stdout, when it announces its port on stderr (`serve`'s route lines)
        self.stdout: list[str] = []
        #: the line that announced the port
        self.announced = ""
        self.port = self._wait_port(port_from)
        self._wait_listening()

    def _wait_listening(self, timeout: float = 20.0) -> None:
        """Some servers announce their port a moment before they accept connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.proc.args} never accepted connections on port {self.port}")

    def _wait_port(self, port_from: str) -> int:
        found: list[int] = []
        ready = threading.Event()
        stream = self.proc.stdout if port_from == "stdout" else self.proc.stderr

        def read() -> None:
            for raw in stream:
                line = raw.decode(errors="replace").rstrip("\n")
                if port_from == "stderr":
                    self.stderr.append(line)
                if not found:
                    port = _port_in(line)
                    if port:
                        self.announced = line
                        found.append(port)
                        ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if port_from == "stdout":
            threading.Thread(target=lambda: self.stderr.extend(
                l.decode(errors="replace") for l in self.proc.stderr), daemon=True).start()
        else:
            threading.Thread(target=lambda: self.stdout.extend(
                l.decode(errors="replace").rstrip("\n") for l in self.proc.stdout), daemon=True).start()
        ready.wait(20)
        if not found:
            self.stop()
            raise RuntimeError(f"{self.proc.args} did not start: {''.join(self.stderr)[-2000:]}")
        return found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _port_in(line: str) -> int | None:
    if announced := re.match(r"PORT (\d+)\b", line):  # `PORT <n>` or `PORT <n>: what listens there`
        return int(announced.group(1))
    if text := re.search(r" INFO +listening listen=\S+:(\d+) ", line):  # serve --log-format text
        return int(text.group(1))
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if record.get("event") == "listening":
            return int(record["listen"].rsplit(":", 1)[1])
    return None


async def get_json(port: int, path: str) -> Any:
    """What a server on loopback ``port`` answers a GET of ``path`` with, as JSON (a peer's `/stats`)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}{path}") as r:
            return await r.json()


def free_port() -> int:
    """A loopback port nothing listens on (for servers to start on, or to show a dead upstream)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def proxy(*args: str) -> Running:
    return Running([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", *args], "stderr")


def peer(module: str, *args: str) -> Running:
    return Running([sys.executable, "-m", module, *args], "stdout")


def wait_until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


async def eventually(check, timeout: float = 10.0, every: float = 0.05):
    """The first truthy value of ``await check()``, polled every ``every`` s for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)
