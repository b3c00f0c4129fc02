"""The operator console on the admin port (issue 14, spec §13): `/api/status`, `/api/events`, the
token and cookie rules, `reminder-bridge status`, OpenMetrics, and a watcher that never reads.

The API tests run a real `reminder-bridge serve` (or `stdio`) in front of real peers over real
sockets (tests/peers/faulty_http.py answers `remind {count}` with that many legacy reminders). The
in-process show_bodies test serves the admin port alone, over a real socket. The last tests check
the pieces without sockets: the readiness rule, the budget gauges, a full watcher queue.
"""
from __future__ import annotations

import asyncio
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from tests.peers.processes import eventually, free_port, peer, proxy
from tests.paths import ROOT

SSE_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LEGACY_HOST_CAPS = {"_meta": {"harn": {"reminders": {"emit": True}}}}
STANDARD_HOST_CAPS = {"reminders": {}}
TOKEN = "c0nsole-t0ken"


# -- helpers (the browser test uses them too) -----------------------------------------------------
def rules_file(tmp_path: Path, upstream: int, *, budget: str = "", admin: int | None = None, token: str = "",
               stage: str = "translate", idle: tuple[str, ...] = ()) -> Path:
    """Route `ci` (and one more route per name in ``idle``, same upstream) to the MCP peer."""
    text = ""
    for name in ("ci", *idle):
        text += (f'[routes.{name}]\nprotocol = "mcp"\npath = "/{name}"\nupstream = "http://127.0.0.1:{upstream}/mcp"\n'
                 f'stage = "{stage}"\n')
    if budget:
        text += f"[routes.ci.budget]\n{budget}\n"
    if admin is not None:
        text += f'[admin]\nlisten = "127.0.0.1:{admin}"\n' + (f'token = "{token}"\n' if token else "")
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


class Bridge:
    """A `reminder-bridge serve` with an admin port, in front of the faulty MCP peer (or the
    ``upstream`` peer module named)."""

    def __init__(self, tmp_path: Path, *, budget: str = "", token: str = "", stage: str = "translate",
                 args: tuple[str, ...] = (), idle: tuple[str, ...] = (), upstream: str = "tests.peers.faulty_http"):
        self.upstream = peer(upstream)
        self.admin = free_port()
        self.token = token
        rules = rules_file(tmp_path, self.upstream.port, budget=budget, admin=self.admin, token=token, stage=stage,
                           idle=idle)
        try:
            self.proxy = proxy("--rules", str(rules), *args)
        except Exception:
            self.upstream.stop()
            raise
        self.base = f"http://127.0.0.1:{self.admin}"
        self.url = f"http://127.0.0.1:{self.proxy.port}/ci"
        wait_listening(self.admin)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def console_link(self) -> str:
        """The console's address the proxy printed at start-up (never with the token)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in list(self.proxy.stderr):
                if line.startswith("{") and '"console"' in line:
                    return json.loads(line)["url"]
            time.sleep(0.05)
        raise AssertionError(f"no console link in {self.proxy.stderr}")

    def stop(self) -> None:
        self.proxy.stop()
        self.upstream.stop()


def wait_listening(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


async def rpc(url: str, msg_id, method: str, params: dict, session: str | None = None,
              http: aiohttp.ClientSession | None = None) -> tuple[dict, list[dict]]:
    """POST one JSON-RPC request; returns (response headers, every message of the answer)."""
    headers = {**SSE_ACCEPT, **({"Mcp-Session-Id": session} if session else {})}
    own = http is None
    http = http or aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
    try:
        async with http.post(url, data=json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method,
                                                   "params": params}), headers=headers) as r:
            raw = await r.read()
            found = dict(r.headers)
    finally:
        if own:
            await http.close()
    if raw.lstrip().startswith(b"{"):
        return found, [json.loads(raw)]
    return found, [json.loads(line[5:]) for line in raw.splitlines() if line.startswith(b"data:")]


async def connect_host(url: str, name: str, capabilities: dict, http: aiohttp.ClientSession | None = None) -> str:
    """An MCP host's initialize; returns its session id."""
    headers, _ = await rpc(url, 0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                                  "clientInfo": {"name": name, "version": "1"}}, http=http)
    return headers["Mcp-Session-Id"]


async def remind(url: str, session: str, count: int, msg_id: int = 1,
                 http: aiohttp.ClientSession | None = None) -> list[dict]:
    _, found = await rpc(url, msg_id, "remind", {"count": count}, session, http=http)
    return found


async def get_json(url: str, headers: dict | None = None) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers=headers or {}) as r:
            assert r.status == 200, (r.status, await r.text())
            return await r.json()


async def status(bridge: Bridge, **query: str) -> dict:
    suffix = ("?" + "&".join(f"{k}={v}" for k, v in query.items())) if query else ""
    return await get_json(f"{bridge.base}/api/status{suffix}", bridge.auth)


async def watcher_listed(bridge: Bridge, since: float) -> bool:
    """Whether `/api/status` lists a feed watcher that connected after ``since`` (wall clock)."""
    return any(w["since"] >= since - 0.001 for w in (await status(bridge))["feed"]["watchers"])


def route(data: dict, name: str = "ci") -> dict:
    return next(r for r in data["routes"] if r["name"] == name)


async def read_events(response: aiohttp.ClientResponse, want, timeout: float = 10.0) -> list[tuple[str, dict]]:
    """Read SSE records (event, data) until ``want(records)`` is true."""
    records: list[tuple[str, dict]] = []
    event, data = "message", []
    deadline = time.monotonic() + timeout
    while not want(records):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"only got {records}")
        line = (await asyncio.wait_for(response.content.readline(), left)).decode().rstrip("\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            records.append((event, json.loads("\n".join(data))))
            event, data = "message", []
    return records


def decisions(records: list[tuple[str, dict]]) -> list[dict]:
    return [d for e, d in records if e == "decision"]


@pytest.fixture
def bridge(tmp_path):
    running = Bridge(tmp_path, budget='rate = 60\nburst = 5\nover = "coalesce"')
    yield running
    running.stop()


# -- /api/status -----------------------------------------------------------------------------------
async def test_status_shows_stage_dialects_actions_budgets_pending_and_readiness(bridge):
    data = await status(bridge)
    ci = route(data)
    assert (ci["protocol"], ci["stage"], ci["transport"]) == ("mcp", "translate", "serve")
    assert ci["readiness"]["verdict"] == "no traffic yet" and ci["readiness"]["ready"] is None
    assert ci["readiness"]["text"] == ("no traffic yet — no host has connected and no reminder has passed since "
                                       "the route started")
    assert ci["budgets"] == [{"kind": "server", "scope": "server:*", "key": None, "tokens": 5.0, "limit": 5,
                              "rate": 60.0, "shadow": False, "keys": 0}]

    session = await connect_host(bridge.url, "modern-host", STANDARD_HOST_CAPS)
    answer = await remind(bridge.url, session, 8)  # 5 within the burst, 3 over: held to coalesce
    assert [m.get("method") for m in answer].count("notifications/reminder") == 5
    ci = route(await status(bridge))
    assert ci["actions"]["rewritten"] >= 5 and ci["actions"]["coalesced"] == 3
    assert set(ci["actions"]) >= {"rewritten", "passed", "dropped", "coalesced", "rate_limited", "invalid", "queued"}
    assert ci["pending"] == {"coalesce": 3} and ci["pending_total"] == 3
    [gauge] = ci["budgets"]
    assert gauge["scope"] == "server:default" or gauge["scope"].startswith("server:")
    assert gauge["limit"] == 5 and gauge["tokens"] < 1
    host, peer_side = ci["dialects"]["host"], ci["dialects"]["peer"]
    assert host["standard"]["count"] == 1 and host["legacy"]["count"] == 0
    assert host["standard"]["last_seen"] == pytest.approx(time.time(), abs=30)
    assert peer_side["legacy"]["count"] >= 1
    assert {"name": "faulty", "dialect": "legacy"}.items() <= ci["clients"]["peer"][0].items()
    assert ci["readiness"]["verdict"] == "yes" and ci["readiness"]["seen"] is True
    assert ci["readiness"]["text"].startswith("ready for enforce: yes — no legacy host since start-up: "
                                              "1 host (1 standard)")

    for name in ("old-b", "old-a", "old-c"):
        await connect_host(bridge.url, name, LEGACY_HOST_CAPS)
    ci = route(await status(bridge))
    assert ci["readiness"]["ready"] is False
    assert ci["readiness"]["text"] == ("ready for enforce: no — 3 legacy hosts seen since start-up "
                                       "(old-a, old-b, old-c)")
    assert ci["readiness"]["legacy_hosts"] == ["old-a", "old-b", "old-c"]
    assert ci["dialects"]["host"]["legacy"]["count"] == 3
    # the window is the operator's: a query can shorten it (and a bad one is refused, saying why)
    assert (await status(bridge, window="2h"))["window_s"] == 7200
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.base}/api/status?window=soon") as r:
            assert r.status == 400 and "window" in (await r.json())["error"]


async def test_budget_gauge_recovers_as_the_bucket_refills(bridge):
    session = await connect_host(bridge.url, "modern-host", STANDARD_HOST_CAPS)
    await remind(bridge.url, session, 5)
    low = route(await status(bridge))["budgets"][0]["tokens"]
    assert low < 1

    async def refilled() -> bool:  # 60/min: one token a second, shown as the bucket fills
        return route(await status(bridge))["budgets"][0]["tokens"] >= low + 2

    assert await eventually(refilled, timeout=10)


# -- /api/events ------------------------------------------------------------------------------------
async def test_events_are_one_record_per_decision_with_hashed_sessions_and_no_bodies(bridge):
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.base}/api/events") as feed:
            assert feed.status == 200 and feed.headers["Content-Type"].startswith("text/event-stream")
            hello = await read_events(feed, lambda r: r)
            assert hello[0] == ("hello", {"queue": 1000, "show_bodies": False})
            a = await connect_host(bridge.url, "modern-a", STANDARD_HOST_CAPS)
            b = await connect_host(bridge.url, "modern-b", STANDARD_HOST_CAPS)
            await remind(bridge.url, a, 2)
            await remind(bridge.url, b, 1)
            records = await read_events(feed, lambda r: len([d for d in decisions(r) if d["reminder_id"]]) >= 3)
            raw_bodies = json.dumps(records)
    reminders = [d for d in decisions(records) if d["reminder_id"]]
    first = reminders[0]
    assert set(first) >= {"time", "route", "session", "direction", "action", "reminder_id", "source", "size", "reason"}
    assert (first["route"], first["direction"], first["action"], first["source"], first["target"]) == \
        ("ci", "toward_host", "rewritten", "legacy", "standard")
    assert first["size"] == len("reminder 0") and first["reason"] is None
    assert first["time"] == pytest.approx(time.time(), abs=30)
    assert "body" not in first and "reminder 0" not in raw_bodies  # bodies stay hidden by default
    assert re.fullmatch(r"[0-9a-f]{12}", first["session"])
    assert reminders[0]["session"] == reminders[1]["session"] != reminders[2]["session"]
    assert a[:12] not in raw_bodies and b[:12] not in raw_bodies  # the session ids themselves never show
    handshakes = [d for e, d in records if e == "handshake"]
    assert {(h["side"], h["dialect"], h["client"]) for h in handshakes} >= {("host", "standard", "modern-a")}


async def test_bodies_are_sent_only_with_show_bodies():
    """In-process admin port with `[admin] show_bodies = true` (the rules' table, as the command
    lines pass it), over a real socket; the flow is the one `stdio` and `serve` run."""
    from bridge.admin import start_admin
    from bridge.telemetry import Recorder
    from tests.unit.test_admin import legacy, mcp_flow

    for show in (False, True):
        recorder = Recorder(route=f"bodies-{show}", log=io.StringIO())
        runner = await start_admin("127.0.0.1:0", recorder, lambda: True, every_recorder=False,
                                   settings=types.SimpleNamespace(show_bodies=show))
        port = runner.addresses[0][1]
        try:
            flow = mcp_flow(recorder)
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/api/events") as feed:
                    await read_events(feed, lambda r: r)
                    flow.from_peer(legacy(7))
                    records = await read_events(feed, lambda r: decisions(r))
            [decision] = decisions(records)
            assert decision["reminder_id"] == "r7" and decision["size"] == 2
            assert ("body" in decision) is show and decision.get("body", "b7") == "b7"
        finally:
            await runner.cleanup()


def _rules_know_show_bodies() -> bool:
    from bridge.rules import Admin

    return "show_bodies" in Admin.model_fields


@pytest.mark.skipif(not _rules_know_show_bodies(), reason="the rules' [admin] table has no show_bodies key yet")
async def test_show_bodies_from_the_rules_file_reaches_the_feed(tmp_path):
    upstream = peer("tests.peers.faulty_http")
    admin = free_port()
    rules = rules_file(tmp_path, upstream.port, admin=admin)
    rules.write_text(rules.read_text() + "show_bodies = true\n")
    running = proxy("--rules", str(rules))
    try:
        wait_listening(admin)
        url = f"http://127.0.0.1:{running.port}/ci"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{admin}/api/events") as feed:
                assert (await read_events(feed, lambda r: r))[0][1]["show_bodies"] is True
                session = await connect_host(url, "modern", STANDARD_HOST_CAPS)
                await remind(url, session, 1)
                records = await read_events(feed, lambda r: [d for d in decisions(r) if d["reminder_id"]])
        assert [d["body"] for d in decisions(records) if d["reminder_id"]] == ["reminder 0"]
    finally:
        running.stop()
        upstream.stop()


# -- token and cookie ------------------------------------------------------------------------------------
def cookie_of(headers) -> tuple[str, str]:
    """(value, attributes) of the console cookie a response sets."""
    for header in headers.getall("Set-Cookie", []):
        name, _, rest = header.partition("=")
        if name.strip() == "reminder_bridge_console":
            value, _, attributes = rest.partition(";")
            return value, attributes
    raise AssertionError(f"no console cookie in {headers}")


async def test_the_token_is_required_and_a_login_sets_an_httponly_strict_cookie(tmp_path):
    bridge = Bridge(tmp_path, token=TOKEN)
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
            base = bridge.base
            async with http.get(f"{base}/") as r:  # a browser: the login form, nothing else
                page = await r.text()
                assert r.status == 401 and 'action="/login"' in page and 'type="password"' in page
                assert "routes" not in page.lower().split("<form")[0] and "Set-Cookie" not in r.headers
            for path in ("/api/status", "/api/events", "/metrics", "/healthz"):
                async with http.get(f"{base}{path}") as r:
                    assert r.status == 401, path
            async with http.get(f"{base}/api/status", headers={"Authorization": f"bearer {TOKEN}"}) as r:
                assert r.status == 200 and (await r.json())["auth"] is True  # the scheme is case-insensitive
            async with http.post(f"{base}/login", data={"token": "guess"}, allow_redirects=False) as r:
                assert r.status == 401 and "Wrong token" in await r.text() and "Set-Cookie" not in r.headers
            async with http.post(f"{base}/login", data={"token": TOKEN}, allow_redirects=False,
                                 headers={"Origin": "http://evil.example"}) as r:
                assert r.status == 403 and "Set-Cookie" not in r.headers
            async with http.post(f"{base}/login", data={"token": TOKEN}, allow_redirects=False) as r:
                assert r.status == 303 and r.headers["Location"] == "/"
                value, attributes = cookie_of(r.headers)
            lowered = attributes.lower()
            assert "httponly" in lowered and "samesite=strict" in lowered and "path=/" in lowered
            assert TOKEN not in value and len(value) >= 32
            cookie = {"Cookie": f"reminder_bridge_console={value}"}
            for path in ("/api/status", "/metrics", "/"):
                async with http.get(f"{base}{path}", headers=cookie) as r:
                    assert r.status == 200, path
            async with http.get(f"{base}/", headers=cookie) as r:
                page = await r.text()
                assert "/static/console.js" in page and "http://" not in page.replace("http://www.w3.org", "")
                assert "default-src 'none'" in r.headers["Content-Security-Policy"]
            async with http.get(f"{base}/api/events", headers=cookie) as r:
                assert r.status == 200
            async with http.get(f"{base}/api/status", headers={"Cookie": "reminder_bridge_console=made-up"}) as r:
                assert r.status == 401
            # the start-up line gives the address, never the token; a `?token=` link signs a browser in
            # and sends it to a URL without the token
            link = bridge.console_link()
            assert link == f"http://127.0.0.1:{bridge.admin}/"
            async with http.get(f"{link}?token={TOKEN}", allow_redirects=False) as r:
                assert r.status == 303 and r.headers["Location"] == "/"
                linked, _ = cookie_of(r.headers)
            async with http.get(f"{base}/api/status", headers={"Cookie": f"reminder_bridge_console={linked}"}) as r:
                assert r.status == 200
            async with http.get(f"{base}/?token=wrong", allow_redirects=False) as r:
                assert r.status == 401 and "Set-Cookie" not in r.headers
            # signing out ends that login on the server, whatever the browser keeps
            async with http.post(f"{base}/logout", headers=cookie, allow_redirects=False) as r:
                assert r.status == 303
            async with http.get(f"{base}/api/status", headers=cookie) as r:
                assert r.status == 401
    finally:
        bridge.stop()


async def test_without_a_token_the_console_is_open_on_loopback_but_not_to_foreign_host_names(bridge):
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.base}/") as r:
            assert r.status == 200 and "/static/console.js" in await r.text()
        async with http.get(f"{bridge.base}/static/console.js") as r:
            assert r.status == 200 and r.content_type == "text/javascript"
        async with http.get(f"{bridge.base}/api/status", headers={"Host": "localhost:1"}) as r:
            assert r.status == 200
        async with http.get(f"{bridge.base}/api/status", headers={"Host": "attacker.example"}) as r:
            assert r.status == 403  # a DNS-rebinding page cannot read it
        async with http.get(f"{bridge.base}/metrics", headers={"Host": "prometheus-target.internal"}) as r:
            assert r.status == 200
    assert bridge.console_link() == f"http://127.0.0.1:{bridge.admin}/"


# -- `reminder-bridge status` ------------------------------------------------------------------------------
def status_command() -> list[str]:
    """`reminder-bridge status` once it is wired into the main parser, else its module."""
    wired = subprocess.run([sys.executable, "-m", "bridge", "status", "--help"], capture_output=True, cwd=ROOT)
    return [sys.executable, "-m", "bridge", "status"] if wired.returncode == 0 else \
        [sys.executable, "-m", "bridge.console.cli"]


async def test_status_command_prints_the_readiness_table_of_a_live_proxy(tmp_path):
    bridge = Bridge(tmp_path, token=TOKEN)
    try:
        await connect_host(bridge.url, "modern", STANDARD_HOST_CAPS)
        await connect_host(bridge.url, "legacy-ide", LEGACY_HOST_CAPS)
        command = status_command()
        loop = asyncio.get_running_loop()

        def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
            return subprocess.run([*command, *args], capture_output=True, text=True, timeout=30, cwd=ROOT,
                                  env={**os.environ, **(env or {})})

        done = await loop.run_in_executor(None, lambda: run("--admin", bridge.base, "--token", TOKEN))
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].split() == ["ROUTE", "PROTOCOL", "STAGE", "HOSTS", "std/legacy/none", "LEGACY", "HOSTS",
                                    "READY", "FOR", "ENFORCE"]
        row = next(line for line in lines if line.startswith("ci "))
        assert row.split()[:5] == ["ci", "mcp", "translate", "1/1/0", "legacy-ide"]
        assert "no — 1 legacy host seen since start-up (legacy-ide)" in row
        assert re.search(r"^window: the last 24 h \(the proxy started \d+ s ago: counted since then\)", done.stdout,
                         re.M), done.stdout
        # HOST:PORT, the token from the environment, and --json
        done = await loop.run_in_executor(None, lambda: run(
            "--admin", f"127.0.0.1:{bridge.admin}", "--json", env={"REMINDER_BRIDGE_ADMIN_TOKEN": TOKEN}))
        assert done.returncode == 0, done.stderr
        assert route(json.loads(done.stdout))["readiness"]["legacy_hosts"] == ["legacy-ide"]
        done = await loop.run_in_executor(None, lambda: run("--admin", bridge.base, "--token", "wrong"))
        assert done.returncode == 2 and "refused that token" in done.stderr
        done = await loop.run_in_executor(None, lambda: run("--admin", f"127.0.0.1:{free_port()}"))
        assert done.returncode == 2 and "cannot read" in done.stderr
    finally:
        bridge.stop()


# -- Prometheus through prometheus_client -----------------------------------------------------------------
FAMILIES = {  # every family as before the switch: name as the text format shows it, type
    "reminder_bridge_reminders_total": "counter", "reminder_bridge_budget_rejections_total": "counter",
    "reminder_bridge_trust_refusals_total": "counter", "reminder_bridge_rewrite_duration_seconds": "histogram",
    "reminder_bridge_pending_reminders": "gauge", "reminder_bridge_rules_reloads_total": "counter",
    "reminder_bridge_sessions_ended_total": "counter", "reminder_bridge_http_refused_total": "counter",
    "reminder_bridge_connections_open": "gauge", "reminder_bridge_connections_refused_total": "counter",
    "reminder_bridge_client_timeouts_total": "counter", "reminder_bridge_inflight_bytes": "gauge",
}


async def test_metrics_are_prometheus_text_or_openmetrics_when_asked(bridge):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    session = await connect_host(bridge.url, "modern-host", STANDARD_HOST_CAPS)
    await remind(bridge.url, session, 2)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.base}/metrics") as r:
            assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            text = await r.text()
        async with http.get(f"{bridge.base}/metrics", headers={
                "Accept": "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5"}) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
            openmetrics = await r.text()
    types_seen = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    assert {name: types_seen.get(name) for name in FAMILIES} == FAMILIES
    assert re.search(r'^reminder_bridge_reminders_total\{action="rewritten",protocol="mcp",route="ci",'
                     r'stage="translate"\} [0-9.]+$', text, re.M)
    assert openmetrics.endswith("# EOF\n")
    parsed = {f.name: f for f in text_string_to_metric_families(openmetrics)}  # strict: raises on bad syntax
    assert parsed["reminder_bridge_reminders"].type == "counter"
    rewritten = [s for s in parsed["reminder_bridge_reminders"].samples if s.labels.get("action") == "rewritten"]
    assert rewritten and rewritten[0].name == "reminder_bridge_reminders_total" and rewritten[0].value >= 2
    assert parsed["reminder_bridge_rewrite_duration_seconds"].type == "histogram"


# -- a watcher that never reads --------------------------------------------------------------------------
def proc_sample(pid: int) -> tuple[float, int]:
    """(CPU seconds used so far, resident set in KiB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return cpu, rss


async def drive(url: str, session: str, count: int, batch: int = 100, each: Callable[[], None] = lambda: None) -> int:
    """``count`` reminders through the proxy, ``batch`` per request, each request once the last is
    answered (then ``each()``); returns how many came back rewritten.  A count, not a time: a loaded
    machine makes it slower, never different (how fast is the bench's)."""
    sent = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        for i in range(1, count // batch + 1):
            answer = await remind(url, session, batch, msg_id=i, http=http)
            sent += sum(1 for m in answer if m.get("method") == "notifications/reminder")
            each()
    return sent


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to sample the proxy's CPU and RSS")
async def test_a_watcher_that_never_reads_costs_the_proxy_nothing_and_its_losses_are_counted(tmp_path):
    bridge = Bridge(tmp_path)  # no budget: every reminder is a decision
    pid = bridge.proxy.proc.pid
    stuck = None
    try:
        session = await connect_host(bridge.url, "flood-host", STANDARD_HOST_CAPS)
        await drive(bridge.url, session, 1000)  # warm up
        cpu0, _ = proc_sample(pid)
        sent_alone = await drive(bridge.url, session, 3000)
        cpu1, rss_alone = proc_sample(pid)

        # a watcher that opens the feed and never reads a byte (a small receive buffer, so the
        # kernel cannot hide the stall for long)
        since = time.time()
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", bridge.admin))
        stuck.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        await eventually(lambda: watcher_listed(bridge, since))
        rss: list[int] = []  # sampled after every answered batch: 40 samples, however fast
        cpu2, _ = proc_sample(pid)
        sent_watched = await drive(bridge.url, session, 4000, each=lambda: rss.append(proc_sample(pid)[1]))
        cpu3, _ = proc_sample(pid)
        feed = (await status(bridge))["feed"]

        # a second watcher that does read still gets every new decision, at once
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{bridge.base}/api/events") as reader:
                await read_events(reader, lambda r: r)
                await remind(bridge.url, session, 3, msg_id=10_000)
                got = await read_events(reader, lambda r: len(decisions(r)) >= 3, timeout=5)
    finally:
        if stuck is not None:
            stuck.close()
        bridge.stop()
    per_reminder_alone = (cpu1 - cpu0) / sent_alone
    per_reminder_watched = (cpu3 - cpu2) / sent_watched
    report = (f"alone: {sent_alone} reminders, {per_reminder_alone * 1e6:.0f} µs CPU each; with the stuck "
              f"watcher: {sent_watched}, {per_reminder_watched * 1e6:.0f} µs each; RSS KiB {rss}; feed {feed}")
    # never blocked by the watcher: every request was answered (a blocked proxy fails the drive's
    # 60 s timeout), every reminder rewritten; no rate asserted (the bench's job, and load's victim)
    assert (sent_alone, sent_watched) == (3000, 4000), report
    # CPU: flat.  The proxy's own CPU seconds, not wall time; the margin absorbs what other processes
    # on 2 cores do to caches, and still catches a watcher that costs work per event (a retry loop,
    # a growing queue), which is many times the cost of a decision
    assert per_reminder_watched <= per_reminder_alone * 3 + 50e-6, report
    settled = rss[len(rss) // 4:]
    assert max(settled) - min(settled) < 12 * 1024, report  # RSS: flat once the queue is full
    assert max(rss) - rss_alone < 24 * 1024, report
    # the stuck watcher lost a whole queue during one write: it was hung up on, its losses counted
    assert feed["dropped"] == 1 and feed["lost"] >= 1000, report
    assert not [w for w in feed["watchers"] if w["lost"]], report
    assert len(decisions(got)) >= 3


# -- stdio -------------------------------------------------------------------------------------------------
async def test_the_console_works_for_stdio_too(tmp_path):
    """`reminder-bridge stdio` with an [admin] table: its one route, derived from the live pipeline
    when the transport does not describe it (`Recorder.status_source`)."""
    from tests.peers.jsonrpc_pipe import JsonRpcPipe
    from tests.integration.test_policy_stdio import FLOOD, PROXY, STANDARD_HOST, flood, wait_for_admin

    admin = free_port()
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 60\nburst = 3\n'
                     f'[admin]\nlisten = "127.0.0.1:{admin}"\n')
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD, cwd=str(ROOT))
    base = f"http://127.0.0.1:{admin}"
    try:
        pipe.request("initialize", STANDARD_HOST)
        await asyncio.get_running_loop().run_in_executor(None, wait_for_admin, admin, pipe.proc)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/api/events") as feed:
                await read_events(feed, lambda r: r)
                await asyncio.get_running_loop().run_in_executor(None, flood, pipe, 2, 0, 5)
                records = await read_events(feed, lambda r: len([d for d in decisions(r) if d["reminder_id"]]) >= 5)
        ci = route(await get_json(f"{base}/api/status"))
    finally:
        pipe.close()
    assert (ci["protocol"], ci["stage"]) == ("mcp", "translate")
    assert ci["dialects"]["host"]["standard"]["count"] == 1
    assert ci["clients"]["host"][0]["name"] == "host"
    assert ci["actions"]["rewritten"] >= 3 and ci["actions"]["rate_limited"] >= 1
    assert ci["budgets"][0]["limit"] == 3 and ci["budgets"][0]["tokens"] < 1
    assert ci["readiness"]["verdict"] == "yes" and ci["readiness"]["seen"] is True
    actions = [d["action"] for d in decisions(records) if d["reminder_id"]]
    assert actions[:5] == ["rewritten"] * 3 + ["rate_limited"] * 2
    assert {d["session"] for d in decisions(records)} and all(d["direction"] == "toward_host"
                                                               for d in decisions(records) if d["reminder_id"])


# -- the pieces, without sockets -----------------------------------------------------------------------------
def test_readiness_follows_the_window_and_names_what_it_saw():
    from bridge.console.feed import Feed
    from bridge.console.status import readiness

    now = [1_000_000.0]
    feed = Feed(clock=lambda: now[0])

    def verdict(window_s: float = 3600.0) -> dict:
        return readiness(feed.routes.get("r"), protocol="acp", stage="translate", now=now[0], window_s=window_s)

    assert verdict()["text"] == ("no traffic yet — no host has connected and no reminder has passed since the "
                                 "route started")
    assert verdict()["ready"] is None
    feed.handshake({"route": "r", "protocol": "acp", "side": "host", "dialect": "standard", "client": "zed"})
    feed.handshake({"route": "r", "protocol": "acp", "side": "host", "dialect": "none", "client": None})
    feed.handshake({"route": "r", "protocol": "acp", "side": "host", "dialect": "none", "client": None})  # the same
    assert verdict()["text"] == ("ready for enforce: yes — no legacy host in the last 1 h: 2 hosts "
                                 "(1 standard, 1 none), no legacy reminder from the host side")
    feed.handshake({"route": "r", "protocol": "acp", "side": "host", "dialect": "legacy", "client": None})
    assert verdict()["text"] == "ready for enforce: no — 1 legacy host seen in the last 1 h (without a clientInfo name)"
    feed.decision({"route": "r", "source": "legacy", "direction": "toward_peer", "action": "rewritten"})
    feed.decision({"route": "r", "source": "legacy", "direction": "toward_host", "action": "rewritten"})  # a peer's
    assert verdict()["text"] == ("ready for enforce: no — 1 legacy host seen in the last 1 h (without a clientInfo "
                                 "name); 1 legacy reminder from the host side in the last 1 h")
    now[0] += 2 * 3600  # out of a 1 h window, still in 24 h
    assert verdict()["verdict"] == "yes" and verdict()["seen"] is False
    assert verdict()["text"] == ("ready for enforce: yes — nothing seen in the last 1 h: no host and no reminder "
                                 "from the host side")
    assert verdict(86400.0)["verdict"] == "no"
    feed.handshake({"route": "r", "protocol": "acp", "side": "host", "dialect": "legacy", "client": "old-ide"})
    assert verdict()["text"] == "ready for enforce: no — 1 legacy host seen in the last 1 h (old-ide)"
    assert verdict()["legacy_hosts"] == ["old-ide"]
    assert readiness(feed.routes["r"], protocol="acp", stage="enforce", now=now[0], window_s=60)["note"] \
        .startswith("the route is already at enforce")


def test_policy_gauges_read_the_buckets_without_charging_them():
    from bridge.model import Reminder
    from bridge.policy import BudgetState, Policy
    from bridge.rules import parse_rules_text

    rules = parse_rules_text('[defaults.budget]\nrate = 60\nburst = 4\nkey = "session"\n[global_budget]\nrate = 600\nburst = 50\n')
    policy = Policy(rules.defaults, rules.global_budget, route="g", state=BudgetState())
    assert [g["scope"] for g in policy.gauges(0.0)] == ["session:*", "global"]
    for session, n in (("a", 3), ("b", 1)):
        for _ in range(n):
            policy.charge(Reminder(body="x"), server="s", session=session, now=10.0)
    first = policy.gauges(10.0)
    assert first == policy.gauges(10.0)  # reading twice changes nothing
    assert [(g["scope"], g["tokens"], g["limit"], g["keys"]) for g in first] == \
        [("session:a", 1.0, 4, 2), ("session:b", 3.0, 4, 2), ("global", 46.0, 50, 1)]
    later = {g["scope"]: g["tokens"] for g in policy.gauges(11.5)}  # a token a second, up to the burst
    assert later == {"session:a": 2.5, "session:b": 4.0, "global": 50.0}
    bucket = policy.state._keyed[("g", "session")].get("a")
    assert (bucket.tokens, bucket.at) == (1.0, 10.0)  # the look refilled nothing


async def test_a_full_queue_drops_the_oldest_and_tells_the_watcher():
    from bridge.console.feed import Feed

    feed = Feed(queue=3)
    watcher = feed.subscribe()
    for n in range(5):
        feed.decision({"route": "r", "action": "passed", "reminder": None, "session": "s", "source": "standard"})
    assert (len(watcher.queue), watcher.lost) == (3, 2)
    sent: list[bytes] = []

    async def write(data: bytes) -> None:
        sent.append(data)
        if len(sent) == 2:
            raise ConnectionResetError

    with pytest.raises(ConnectionResetError):
        await feed.stream(watcher, write)
    text = b"".join(sent).decode()
    assert text.count("event: decision") == 3 and 'event: lost\ndata: {"lost": 2}' in text
    feed.unsubscribe(watcher)
    assert feed.summary()["lost"] == 2 and feed.summary()["subscribers"] == 0
    feed.decision({"route": "r", "action": "passed"})  # nobody watches: nothing is queued anywhere


async def test_a_queue_is_bounded_in_bytes_and_a_watcher_stuck_in_one_write_is_hung_up_on():
    from bridge.console.feed import MAX_BODY, Feed

    feed = Feed(queue=10, queue_bytes=20_000, show_bodies=True)
    watcher = feed.subscribe()
    hung_up: list[bool] = []
    hanging_up = asyncio.Event()

    def hang_up() -> None:
        hung_up.append(True)
        hanging_up.set()

    watcher.hang_up = hang_up
    refused = types.SimpleNamespace(id="r", dedupe_key=None, body="b" * 1_000_000)  # a body the trust limit refused
    for _ in range(10):
        feed.decision({"route": "r", "action": "refused", "reminder": refused})
    assert 0 < watcher.bytes <= 20_000 and len(watcher.queue) < 10 and watcher.lost == 10 - len(watcher.queue)
    assert {len(data["body"]) for _, data, _ in watcher.queue} == {MAX_BODY + 1}  # shortened, with "…"
    assert {data["size"] for _, data, _ in watcher.queue} == {1_000_000}

    never, writing = asyncio.Event(), asyncio.Event()

    async def write(data: bytes) -> None:  # a socket that never drains
        writing.set()
        await never.wait()

    writer = asyncio.ensure_future(feed.stream(watcher, write))
    await asyncio.wait_for(writing.wait(), 5)  # the writer starts, and waits in its first write
    assert watcher.writing
    before = watcher.lost
    for n in range(10):
        feed.decision({"route": "r", "action": "passed", "reminder": None, "session": n})
    assert watcher in feed.subscribers  # losses alone are counted, not punished
    for n in range(10):
        feed.decision({"route": "r", "action": "passed", "reminder": None, "session": n})
    assert watcher not in feed.subscribers and feed.dropped == 1  # a whole queue lost during one write
    await asyncio.wait_for(hanging_up.wait(), 5)  # the hang-up runs on the watcher's loop
    assert hung_up == [True] and feed.summary()["lost"] == watcher.lost == before + 10
    writer.cancel()
