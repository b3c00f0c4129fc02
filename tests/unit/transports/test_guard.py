"""`bridge.transports.guard`: what `serve` enforces around every request. One byte budget for all
clients, a connection cap that follows the descriptor limit, header and idle timeouts, and a log
that says a complaint once per interval and never quotes a client. The connection tests use real
sockets against an aiohttp server behind the guard, in this process."""
from __future__ import annotations

import asyncio
import errno
import io
import json
import logging
import socket

import pytest
from aiohttp import web

from bridge.rules import Limits
from bridge.telemetry import Recorder
from bridge.transports.guard import QUIET_INTERVAL, RESERVED_FDS, ByteBudget, Guard, Holding, QuietLog, guarded_site
from tests.peers.processes import eventually, free_port


class Log(io.StringIO):
    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


def counted(counter, label: str) -> float:
    """What a prometheus_client counter of the guard has counted under ``label``."""
    return sum(sample.value for family in counter.collect() for sample in family.samples
               if sample.name.endswith("_total") and label in sample.labels.values())


def recorder() -> tuple[Recorder, Log]:
    log = Log()
    return Recorder(log=log), log


# -- the quiet log ----------------------------------------------------------------------------------------
def test_a_complaint_is_logged_once_per_interval_with_how_many_were_held_back():
    now = [100.0]
    rec, log = recorder()
    quiet = QuietLog(rec, clock=lambda: now[0])
    for _ in range(500):  # a machine out of descriptors fails every accept
        quiet("accept_failed", why="no descriptors")
    now[0] += QUIET_INTERVAL - 0.001
    quiet("accept_failed", why="no descriptors")
    assert [e["event"] for e in log.events()] == ["accept_failed"] and "repeated" not in log.events()[0]
    now[0] += 0.001
    quiet("accept_failed", why="no descriptors")
    second = log.events()[1]
    assert (second["event"], second["repeated"], second["level"]) == ("accept_failed", 500, "error")


def test_each_kind_of_complaint_has_its_own_interval():
    rec, log = recorder()
    quiet = QuietLog(rec, clock=lambda: 0.0)
    for _ in range(3):
        quiet("accept_failed", why="x")
        quiet("http_error", why="y")
    assert [e["event"] for e in log.events()] == ["accept_failed", "http_error"]


# -- one byte budget for every request ---------------------------------------------------------------------
def test_requests_share_one_byte_budget_and_give_back_what_they_held():
    budget = ByteBudget(1000)
    first, second = Holding(budget), Holding(budget)
    assert first.take(600) and first.take(100)
    assert not second.take(301)  # 700 + 301 > 1000: refused, and nothing of it is held
    assert second.take(300) and budget.used == 1000
    assert not first.take(1)
    first.release()
    assert budget.used == 300 and first.held == 0
    first.release()  # a second release gives back nothing more
    assert budget.used == 300
    assert second.take(700) and not second.take(1)


def test_a_refusal_holds_nothing_even_for_a_huge_request():
    budget = ByteBudget(10)
    holding = Holding(budget)
    assert not holding.take(10 ** 18)
    assert budget.used == 0 and holding.held == 0


# -- the connection cap ---------------------------------------------------------------------------------------
def test_the_connection_cap_is_half_the_descriptors_left_for_clients():
    rec, log = recorder()
    assert Guard(Limits(), rec, fd_limit=1000).max_connections == (1000 - RESERVED_FDS) // 2
    assert Guard(Limits(), rec, fd_limit=20).max_connections == 16  # never below a usable minimum
    assert Guard(Limits(max_connections=10), rec, fd_limit=1000).max_connections == 10
    assert log.events() == []


def test_a_configured_cap_beyond_the_descriptors_is_kept_and_warned_about():
    rec, log = recorder()
    assert Guard(Limits(max_connections=5000), rec, fd_limit=1000).max_connections == 5000
    [warning] = log.events()
    assert warning["event"] == "connection_cap_above_fd_limit" and warning["fd_limit"] == 1000


# -- real connections ----------------------------------------------------------------------------------------
@pytest.fixture
async def serving(request):
    """(guard, port): an aiohttp app behind a `Guard` with the test's `Limits`; `GET /slow?s=` answers
    after that long. The app tells the guard when each request starts and ends, as `serve` does."""
    limits = request.param
    guard = Guard(limits, recorder()[0], fd_limit=1000)

    @web.middleware
    async def told(req: web.Request, handler):
        connection = guard.connection(req.transport)
        connection.request_started()
        try:
            return await handler(req)
        finally:
            connection.request_finished()

    async def slow(req: web.Request) -> web.Response:
        await asyncio.sleep(float(req.query.get("s", "0")))  # the stimulus: a request that takes its time
        return web.Response(text="ok")

    app = web.Application(middlewares=[told])
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await guarded_site(runner, "127.0.0.1", port, guard).start()
    yield guard, port
    await runner.cleanup()


async def exchange(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send ``data`` on a new connection and read until the proxy closes it (or ``timeout``)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()


GET = b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("serving", [Limits(max_connections=2)], indirect=True)
async def test_a_connection_over_the_cap_gets_a_clear_refusal_and_a_freed_place_is_taken_again(serving):
    guard, port = serving
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        await eventually(lambda: _open(guard, 2))
        answer = await exchange(port, GET)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in answer
        assert b"max_connections = 2" in answer and counted(guard.refused, "max_connections") == 1
        held.pop().close()
        await eventually(lambda: _open(guard, 1))
        assert (await exchange(port, GET)).startswith(b"HTTP/1.1 200 ")
    finally:
        for conn in held:
            conn.close()


async def _open(guard: Guard, n: int) -> bool:
    return len(guard.open) == n


@pytest.mark.parametrize("serving", [Limits(header_timeout_s=0.3)], indirect=True)
async def test_headers_that_never_finish_get_a_408_and_the_connection_closed(serving):
    guard, port = serving
    answer = await exchange(port, b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    assert answer.startswith(b"HTTP/1.1 408 ") and counted(guard.timeouts, "header") == 1
    assert await exchange(port, b"") == b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    assert counted(guard.timeouts, "header") == 2  # a connection that sends nothing at all, the same


@pytest.mark.parametrize("serving", [Limits(header_timeout_s=0.3, idle_timeout_s=0.3)], indirect=True)
async def test_no_timer_cuts_a_request_being_handled_and_an_idle_connection_is_closed(serving):
    guard, port = serving
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /slow?s=0.9 HTTP/1.1\r\nHost: x\r\n\r\n")  # three header timeouts long
        status = await asyncio.wait_for(reader.readline(), 10)
        assert status.startswith(b"HTTP/1.1 200 ")
        assert await asyncio.wait_for(reader.read(), 10)  # the rest, then the idle connection is closed
        assert counted(guard.timeouts, "idle") == 1 and counted(guard.timeouts, "header") == counted(guard.timeouts, "body") == 0
    finally:
        writer.close()


# -- what the event loop and aiohttp complain about ------------------------------------------------------
@pytest.fixture
async def installed():
    """A guard whose `install` is undone afterwards (it takes over process-wide logging)."""
    rec, log = recorder()
    guard = Guard(Limits(), rec, fd_limit=1000)
    loop = asyncio.get_running_loop()
    aiohttp_log = logging.getLogger("aiohttp")
    kept = (loop.get_exception_handler(), aiohttp_log.handlers[:], aiohttp_log.propagate)
    guard.install(loop)
    yield loop, log
    loop.set_exception_handler(kept[0])
    aiohttp_log.handlers[:], aiohttp_log.propagate = kept[1], kept[2]


async def test_failed_accepts_on_an_exhausted_machine_are_one_quiet_line(installed):
    loop, log = installed
    for _ in range(100):
        loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                     "exception": OSError(errno.EMFILE, "Too many open files")})
    [line] = log.events()
    assert line["event"] == "accept_failed" and "errno 24" in line["why"]


async def test_aiohttp_errors_are_logged_by_kind_without_their_text(installed):
    _, log = installed
    try:
        raise ValueError("Bad header X-Api-Key: sk-live-s3cret")
    except ValueError:
        logging.getLogger("aiohttp.server").exception("Error handling request from 10.0.0.1: Cookie: sess=s3cret")
    [line] = log.events()
    assert (line["event"], line["kind"], line["logger"]) == ("http_error", "ValueError", "aiohttp.server")
    assert "s3cret" not in log.getvalue()
