"""Shared fixtures: the wire contract's schemas and vectors, a real `redis-server`, and the run's
closing list of tests a missing real component kept from running.

The contract travels with the clone (docs/spec.md, tests/schemas/, tests/vectors/), so no test
needs anything beside it; tests/unit/test_contract.py checks the copies against ../shared when a
CI checkout has it there.

A real `redis-server` for the shared-state tests: `redis_url` (one per session) and
`redis_server` (one per test, to kill, restart and pause).
"""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.components import REDIS, install_command, skipped_for_missing
from tests.paths import SCHEMAS, VECTORS

pytest.register_assert_rewrite("tests.integration.era_tours")  # its asserts explain themselves too


@pytest.fixture(scope="session")
def schemas_dir() -> Path:
    return SCHEMAS


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    return VECTORS


@pytest.fixture(scope="session")
def load_schema():
    """load_schema("mcp-2025-11-25.schema.json") → the parsed document from tests/schemas (cached)."""
    cache: dict[str, dict] = {}

    def load(name: str) -> dict:
        if name not in cache:
            cache[name] = json.loads((SCHEMAS / name).read_text())
        return cache[name]

    return load


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    """End the run (after pytest's own summaries, before its closing count) by naming every test a
    missing real component kept from running, and the one command that installs them all."""
    yield
    skips = [(report.nodeid, str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr))
             for report in terminalreporter.stats.get("skipped", [])]
    missing = skipped_for_missing(skips)
    if not missing:
        return
    terminalreporter.section("skipped: real components missing on this machine", yellow=True)
    for component, nodeids in missing.items():
        tests = "1 test" if len(nodeids) == 1 else f"{len(nodeids)} tests"
        terminalreporter.write_line(f"{component.name} is not installed; {tests} did not run:")
        for nodeid in nodeids:
            terminalreporter.write_line(f"    {nodeid}")
    terminalreporter.write_line("Install them all with:")
    terminalreporter.write_line(f"    {install_command(missing)}", bold=True)


# -- a real Redis for the shared-state tests (bridge/state, docs/deploy.md) ------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    """The `redis-server` on PATH; skips (or fails, with REMINDER_BRIDGE_REQUIRE_REDIS=1) without one."""
    found = REDIS.path()
    if found is None:
        why = REDIS.missing()
        if REDIS.required:
            pytest.fail(f"{REDIS.require_env}=1 but this test {why}", pytrace=False)
        pytest.skip(why)
    return found


class RedisServer:
    """One `redis-server` on a loopback port with its own temporary directory and no persistence.

    ``kill()`` / ``start()`` (same port: clients reconnect to the same URL), ``pause()`` / ``resume()``
    (SIGSTOP / SIGCONT: a Redis that accepts connections and never answers).
    """

    def __init__(self, binary: str, directory: str):
        self.binary = binary
        self.directory = directory
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None, "already running"
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory,
             "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode} on port {self.port}")
            if self.answers():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis-server did not answer PING on port {self.port} within {timeout} s")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc is not None:
            if self.paused:
                self.resume()
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False


@pytest.fixture(scope="session")
def redis_url():
    """``redis://127.0.0.1:N/0`` of a redis-server for the whole session (tests use their own key prefix)."""
    binary = redis_server_binary()
    with tempfile.TemporaryDirectory(prefix="rb-redis-") as directory:
        server = RedisServer(binary, directory)
        server.start()
        try:
            yield server.url
        finally:
            server.kill()


@pytest.fixture
def redis_server():
    """A redis-server of the test's own, to kill, restart (same port), pause and resume; stopped after."""
    binary = redis_server_binary()
    with tempfile.TemporaryDirectory(prefix="rb-redis-") as directory:
        server = RedisServer(binary, directory)
        server.start()
        try:
            yield server
        finally:
            server.kill()
