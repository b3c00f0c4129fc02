"""The proxy's processes as an operator's tools treat them (issue 19, findings 9 and 10), with real
processes, sockets, upstreams and a real redis-server:

- SIGHUP, the documented reload signal, from the first instant: while the process is still
  importing (it has loaded pydantic_core, long before its imports are done) and again and again
  while `serve`, `serve --workers 2` and `stdio` start, it changes nothing: the process comes up
  and serves.
- `serve --workers`: a SIGKILLed supervisor takes every worker with it and frees the port; a killed
  worker is logged and restarted; every exit is logged.
- A reload that moves a route's `upstream` or `path` is applied (new requests go to the new
  upstream, the route answers at its new path), and one the route cannot take is refused; the log
  line and `reminder_bridge_rules_reloads_total{result,field}` say which and why.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from tests.fault.test_serve import body, faulty, initialize, messages, metrics, post, sample
from tests.peers.processes import Running, free_port, proxy, wait_until

pytestmark = pytest.mark.fault

#: between the SIGHUPs that follow the first, until the process is up
SIGHUP_EVERY_S = 0.1


class Started:
    """A `python -m bridge ...` process started here. Its stderr (JSON log lines) and stdout (frames)
    are read as they come; `wait_for` wakes on each new line, or when both streams closed."""

    def __init__(self, *args: str, stdin: bool = False):
        self.at = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "bridge", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self.changed = threading.Condition()
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        self.open = 2
        for stream, lines in ((self.proc.stderr, self.stderr), (self.proc.stdout, self.stdout)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    def _read(self, stream, lines: list[str]) -> None:
        for raw in stream:
            with self.changed:
                lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.open -= 1
            self.changed.notify_all()

    def events(self, event: str) -> list[dict]:
        with self.changed:
            return [json.loads(line) for line in self.stderr if line.startswith("{") and f'"{event}"' in line]

    def wait_for(self, check: Callable[[], object], timeout: float) -> bool:
        """Whether ``check()`` holds within ``timeout`` s (False at once when the process's output ended)."""
        with self.changed:
            return bool(self.changed.wait_for(lambda: check() or not self.open, timeout)) and bool(check())

    def send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def said(self) -> str:
        with self.changed:
            return "\n".join(self.stderr)[-3000:]


def importing(pid: int) -> bool:
    """Whether process ``pid`` is in the middle of the bridge's imports: it has loaded pydantic_core,
    which `bridge.rules` needs, well after `hangup.hold` (the first thing `bridge.cli` does) and
    long before the command's own SIGHUP handler can be in place."""
    with open(f"/proc/{pid}/maps") as maps:
        return "pydantic_core" in maps.read()


def until_importing(started: Started) -> None:
    """Until ``started`` is importing: the stimulus of finding 9, "a SIGHUP before the imports have
    finished", as the process's own progress shows it. (A fixed time since exec is no such moment on
    a loaded machine: before the interpreter has run a line, SIGHUP's default ends any process.)"""
    wait_until(lambda: started.proc.poll() is not None or importing(started.proc.pid), timeout=30)


def hang_up_while_starting(started: Started, up: Callable[[], object]) -> int:
    """SIGHUP ``started`` while it is still importing, then every 0.1 s until it is
    ``up`` (or gone); being up is waited on as an event. (`serve` takes about a second to import;
    the first SIGHUPs land before that is done.) Returns how many SIGHUPs were sent."""
    until_importing(started)
    started.proc.send_signal(signal.SIGHUP)
    sent = 1
    while not started.wait_for(up, timeout=SIGHUP_EVERY_S):
        if started.proc.poll() is not None or time.monotonic() - started.at > 60:
            break
        started.proc.send_signal(signal.SIGHUP)
        sent += 1
    return sent


def listening(started: Started) -> dict | None:
    return next(iter(started.events("listening")), None)


def port_of(line: dict) -> int:
    return int(line["listen"].rsplit(":", 1)[1])


def gone(pid: int) -> bool:
    """The process no longer runs: no /proc entry, or a zombie (it holds no socket any more)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def running(pid: int) -> bool:
    return not gone(pid)


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            pass
        else:
            return False
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        probe.listen()
    return True


@pytest.fixture
def upstream():
    server = faulty()
    yield server
    server.stop()


ROUTE = """
[admin]
listen = "127.0.0.1:{admin}"
[routes.main]
protocol = "mcp"
path = "{path}"
upstream = "{upstream}"
stage = "translate"
"""


def rules_for(upstream: Running, path: str = "/") -> str:
    """One MCP route to ``upstream``; the admin port is left as `{admin}` (see `Reloading`)."""
    return ROUTE.format(admin="{admin}", path=path, upstream=f"http://127.0.0.1:{upstream.port}")


# -- 9. SIGHUP from the first instant ---------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
async def test_sighup_from_the_first_instant_of_serve_changes_nothing(upstream, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(rules_for(upstream).replace("{admin}", str(free_port())))
    started = Started("serve", "--listen", "127.0.0.1:0", "--rules", str(rules), "--log-level", "info")
    try:
        hang_up_while_starting(started, lambda: listening(started))
        assert started.proc.poll() is None, started.said()
        status, _, raw = await post(port_of(listening(started)), initialize(1))
        assert status == 200 and "result" in messages(raw)[-1]
        # the SIGHUPs that came before the handler existed were not lost: the rules were reloaded
        assert started.wait_for(lambda: [e for e in started.events("rules_reloaded") if e["trigger"] == "SIGHUP"], 10)
    finally:
        started.stop()


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="--workers needs SO_REUSEPORT")
async def test_sighup_from_the_first_instant_of_serve_workers_changes_nothing(upstream, redis_url):
    started = Started("serve", "--workers", "2", "--state", redis_url, "--listen", "127.0.0.1:0",
                      "--protocol", "mcp", "--upstream", f"http://127.0.0.1:{upstream.port}")
    try:
        hang_up_while_starting(started, lambda: listening(started))
        assert started.proc.poll() is None, started.said()
        pids = listening(started)["workers"]
        assert len(pids) == 2 and all(running(pid) for pid in pids)
        assert not started.events("worker_exited"), started.said()
        for i in range(6):  # fresh connections: the kernel spreads them over both workers
            status, _, raw = await post(port_of(listening(started)), initialize(i))
            assert status == 200 and "result" in messages(raw)[-1]
        started.proc.send_signal(signal.SIGHUP)  # and after start-up, each worker takes it (no rules: skipped)
        assert started.wait_for(lambda: len(started.events("reload_skipped")) >= 2, 10), started.said()
        assert started.proc.poll() is None and all(running(pid) for pid in pids)
    finally:
        started.stop()


async def test_sighup_from_the_first_instant_of_stdio_changes_nothing(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n')
    # with an admin port, as docs/stdio.md configures it: its imports come before the reload handler
    started = Started("stdio", "--rules", str(rules), "--log-level", "info", "--admin", "127.0.0.1:0", "--",
                      sys.executable, "-m", "tests.peers.standard_mcp_server", stdin=True)
    try:
        started.send(initialize(1))  # read once the proxy is up

        def answered(msg_id: int) -> Callable[[], bool]:
            return lambda: any(json.loads(line).get("id") == msg_id for line in started.stdout)

        hang_up_while_starting(started, answered(1))
        assert started.proc.poll() is None, started.said()
        started.send(body(2, "tools/list"))
        assert started.wait_for(answered(2), 10), started.said()
        assert started.wait_for(lambda: [e for e in started.events("rules_reloaded") if e["trigger"] == "SIGHUP"], 10)
    finally:
        started.stop()


def test_a_command_that_never_reloads_keeps_sighups_default():
    """`translate` waits for its stdin here: the SIGHUP noted while it started is delivered once the
    command line says it never reloads, and ends it as a hung-up terminal would."""
    started = Started("translate", "--protocol", "mcp", "--toward", "host", "--source", "legacy",
                      "--target", "standard", stdin=True)
    try:
        until_importing(started)  # noted while the command starts, then delivered once it says it never reloads
        started.proc.send_signal(signal.SIGHUP)
        assert started.proc.wait(30) == -signal.SIGHUP, started.said()
    finally:
        started.stop()


# -- 9. workers end with their supervisor; every exit is logged -----------------------------------------------
@pytest.fixture
def workers(upstream, redis_url):
    if not hasattr(socket, "SO_REUSEPORT"):
        pytest.skip("--workers needs SO_REUSEPORT")
    started = proxy("--workers", "2", "--state", redis_url, "--protocol", "mcp",
                    "--upstream", f"http://127.0.0.1:{upstream.port}")
    yield started
    started.stop()


def pids_of(started: Running) -> list[int]:
    return next(json.loads(line) for line in started.stderr if '"listening"' in line)["workers"]


def logged(started: Running, event: str) -> list[dict]:
    return [json.loads(line) for line in list(started.stderr) if f'"event": "{event}"' in line]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="watches the workers in /proc")
def test_a_sigkilled_supervisor_takes_every_worker_with_it_and_frees_the_port(workers):
    pids = pids_of(workers)
    assert all(running(pid) for pid in pids)
    workers.proc.kill()
    workers.proc.wait(10)
    wait_until(lambda: all(gone(pid) for pid in pids), timeout=30)
    wait_until(lambda: port_free(workers.port), timeout=10)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="watches the workers in /proc")
async def test_a_killed_worker_is_logged_and_restarted_and_every_exit_is_logged(workers):
    first, second = pids_of(workers)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: [e for e in logged(workers, "worker_restarted") if e["replaces"] == first], timeout=30)
    exited = [e for e in logged(workers, "worker_exited") if e["pid"] == first]
    assert exited and exited[0]["signal"] == "SIGKILL" and exited[0]["restarted"] is True, workers.stderr[-5:]
    replacement = next(e["pid"] for e in logged(workers, "worker_restarted") if e["replaces"] == first)
    assert workers.proc.poll() is None and running(second) and running(replacement)
    for i in range(8):  # the set serves on: fresh connections reach both workers
        status, _, raw = await post(workers.port, initialize(i))
        assert status == 200 and "result" in messages(raw)[-1]
    workers.proc.send_signal(signal.SIGTERM)
    assert workers.proc.wait(30) == 0
    wait_until(lambda: gone(second) and gone(replacement))
    at_stop = {e["pid"]: e for e in logged(workers, "worker_exited") if e["pid"] != first}
    assert set(at_stop) == {second, replacement}, workers.stderr[-6:]
    assert all(e["restarted"] is False and e["code"] == 0 for e in at_stop.values())


# -- 10. a reload that moves a route ---------------------------------------------------------------------
class Reloading:
    """`serve --rules FILE` and a way to rewrite the file and SIGHUP it, waiting for the verdict;
    `{admin}` in the texts is the admin port."""

    def __init__(self, path, text: str, *args: str):
        self.path, self.admin = path, free_port()
        path.write_text(text.replace("{admin}", str(self.admin)))
        self.bridge = proxy("--rules", str(path), *args)

    def reload(self, text: str, event: str) -> dict:
        before = len(self.bridge.stderr)
        self.path.write_text(text.replace("{admin}", str(self.admin)))
        self.bridge.proc.send_signal(signal.SIGHUP)
        found: list[dict] = []

        def verdict() -> bool:
            found[:] = [json.loads(line) for line in self.bridge.stderr[before:]
                        if '"reload_refused"' in line or '"rules_reloaded"' in line]
            return bool(found)

        wait_until(verdict)
        assert found[0]["event"] == event, found[0]
        return found[0]


def host_seen(raw: bytes) -> str:
    """The `Host` header the upstream got (the `headers` method of tests/peers/faulty_http.py)."""
    headers = messages(raw)[-1]["result"]["headers"]
    return next(v for k, v in headers.items() if k.lower() == "host")


async def test_a_reload_that_moves_the_upstream_sends_new_requests_there(tmp_path):
    first, second = faulty(), faulty()
    setup = Reloading(tmp_path / "rules.toml", rules_for(first))
    try:
        port = setup.bridge.port
        _, headers, _ = await post(port, initialize(1))
        session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]}
        assert host_seen((await post(port, body(2, "headers"), session))[2]) == f"127.0.0.1:{first.port}"
        line = setup.reload(rules_for(second), "rules_reloaded")
        assert line["moved"] == {"main": {"upstream": {"from": f"http://127.0.0.1:{first.port}",
                                                       "to": f"http://127.0.0.1:{second.port}"}}}
        assert "new upstream" in line["why"]
        assert host_seen((await post(port, body(3, "headers")))[2]) == f"127.0.0.1:{second.port}"
        # an existing session's next request goes there too (this upstream accepts any session id)
        assert host_seen((await post(port, body(4, "headers"), session))[2]) == f"127.0.0.1:{second.port}"
        text = await metrics(setup.admin)
        assert sample(text, "reminder_bridge_rules_reloads_total", result="ok", field="upstream") == 1
    finally:
        setup.bridge.stop()
        first.stop()
        second.stop()


async def test_a_reload_that_moves_the_path_moves_the_route(upstream, tmp_path):
    setup = Reloading(tmp_path / "rules.toml", rules_for(upstream, path="/old"))
    try:
        port = setup.bridge.port
        status, _, raw = await post(port, body(1, "headers"), path="/old/mcp")
        assert status == 200 and messages(raw)[-1]["result"]["path"] == "/mcp"
        line = setup.reload(rules_for(upstream, path="/new"), "rules_reloaded")
        assert line["moved"] == {"main": {"path": {"from": "/old", "to": "/new"}}}
        status, _, raw = await post(port, body(2, "headers"), path="/new/mcp")
        assert status == 200 and messages(raw)[-1]["result"]["path"] == "/mcp"
        status, _, raw = await post(port, body(3, "headers"), path="/old/mcp")
        assert status == 404 and b"no route" in raw
        text = await metrics(setup.admin)
        assert sample(text, "reminder_bridge_rules_reloads_total", result="ok", field="path") == 1
    finally:
        setup.bridge.stop()


TWO_ROUTES = """
[admin]
listen = "127.0.0.1:{admin}"
[routes.main]
protocol = "mcp"
path = "/main"
upstream = "UPSTREAM"
[routes.other]
protocol = "mcp"
path = "OTHER_PATH"
upstream = "UPSTREAM"
"""


async def test_a_reload_a_running_route_cannot_take_is_refused_and_says_why(upstream, tmp_path):
    url = f"http://127.0.0.1:{upstream.port}"
    two = TWO_ROUTES.replace("UPSTREAM", url)
    setup = Reloading(tmp_path / "rules.toml", two.replace("OTHER_PATH", "/other"))
    try:
        refusals = {
            "protocol": two.replace("OTHER_PATH", "/other").replace('protocol = "mcp"', 'protocol = "a2a"', 1),
            "upstream": two.replace("OTHER_PATH", "/other").replace(f'"{url}"', f'"ws://127.0.0.1:{upstream.port}"', 1),
            "path": two.replace("OTHER_PATH", "/main"),
        }
        for field, text in refusals.items():
            line = setup.reload(text, "reload_refused")
            assert line["field"] == field and line["why"].endswith("keeping the previous rules"), line
        assert "restart" in setup.reload(refusals["protocol"], "reload_refused")["why"]
        for path in ("/main/mcp", "/other/mcp"):  # the previous rules serve on, unchanged
            status, _, raw = await post(setup.bridge.port, body(1, "headers"), path=path)
            assert status == 200 and messages(raw)[-1]["result"]["path"] == "/mcp"
        text = await metrics(setup.admin)
        for field in refusals:
            assert sample(text, "reminder_bridge_rules_reloads_total", route="main", result="refused", field=field) >= 1
        assert sample(text, "reminder_bridge_rules_reloads_total", result="ok") == 0
    finally:
        setup.bridge.stop()


async def test_a_reload_keeps_the_command_lines_allowed_origins(upstream, tmp_path):
    setup = Reloading(tmp_path / "rules.toml", rules_for(upstream), "--allowed-origin", "https://app.example")
    origin = {"Origin": "https://app.example"}
    try:
        assert (await post(setup.bridge.port, body(1, "ping"), origin))[0] == 200
        setup.reload(rules_for(upstream).replace('"translate"', '"observe"'), "rules_reloaded")
        assert (await post(setup.bridge.port, body(2, "ping"), origin))[0] == 200
    finally:
        setup.bridge.stop()
