"""The admin port (spec §9) on a real socket: health, readiness, Prometheus metrics that move as
reminders are decided, loopback by default, and an optional bearer token (the exposition itself,
without a socket: tests/unit/test_admin.py)."""
from __future__ import annotations

import io
import json
import subprocess
import urllib.error
import urllib.request

import aiohttp

from bridge.admin import start_admin
from bridge.telemetry import Recorder
from tests.integration.test_policy_stdio import FLOOD, PROXY, STANDARD_HOST, flood, free_port, wait_for_admin
from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.unit.test_admin import frame, samples


def scrape_samples(port: int, token: str) -> dict[tuple[str, frozenset], float]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    return samples(urllib.request.urlopen(request, timeout=5).read().decode())


async def test_health_readiness_and_the_bearer_token():
    recorder = Recorder(route="fs", log=io.StringIO())
    ready = {"now": False}
    runner = await start_admin("127.0.0.1:0", recorder, lambda: ready["now"], token="s3cret", every_recorder=False)
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{port}"
            async with http.get(f"{base}/metrics") as r:
                assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
            async with http.get(f"{base}/metrics", headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401
            auth = {"Authorization": "Bearer s3cret"}
            async with http.get(f"{base}/healthz", headers=auth) as r:
                assert (r.status, await r.text()) == (200, "ok\n")
            async with http.get(f"{base}/readyz", headers=auth) as r:
                assert r.status == 503
            ready["now"] = True
            async with http.get(f"{base}/readyz", headers=auth) as r:
                assert r.status == 200
            async with http.get(f"{base}/metrics", headers=auth) as r:
                assert r.status == 200 and r.content_type == "text/plain"
                assert "# TYPE reminder_bridge_reminders_total counter" in await r.text()
    finally:
        await runner.cleanup()


async def test_a_non_loopback_admin_without_a_token_is_warned_about():
    log = io.StringIO()
    recorder = Recorder(route="fs", log=log)
    runner = await start_admin("0.0.0.0:0", recorder, lambda: True, every_recorder=False)
    await runner.cleanup()
    line = json.loads(log.getvalue().splitlines()[0])
    assert line["event"] == "admin_exposed" and "bearer token" in line["why"]


def test_scraping_a_running_proxy_shows_the_counters_move(tmp_path):
    """The admin port of `reminder-bridge stdio`, from the rules file's [admin] table, with its token."""
    rules = tmp_path / "rules.toml"
    port = free_port()
    rules.write_text(f'[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 60\nburst = 3\n'
                     f'[admin]\nlisten = "127.0.0.1:{port}"\ntoken = "t0ken"\n')
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD)
    try:
        pipe.request("initialize", STANDARD_HOST)
        wait_for_admin(port, pipe.proc)
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
            raise AssertionError("metrics served without the token")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        name = "reminder_bridge_reminders_total"
        labels = {("protocol", "mcp"), ("route", "ci"), ("stage", "translate")}
        rewritten = (name, frozenset({*labels, ("action", "rewritten")}))
        limited = (name, frozenset({*labels, ("action", "rate_limited")}))
        before = scrape_samples(port, "t0ken")
        flood(pipe, 2, 0, 2)
        middle = scrape_samples(port, "t0ken")
        flood(pipe, 3, 2, 4)
        after = scrape_samples(port, "t0ken")
    finally:
        pipe.close()
    assert before[rewritten] == 1 and limited not in before  # the handshake's capability only
    assert (middle[rewritten], middle.get(limited, 0)) == (3, 0)
    assert after[rewritten] in (4, 5) and after[rewritten] + after[limited] == 7  # 6 reminders + the handshake


def test_console_exporter_writes_spans_to_stderr_never_to_the_protocol_stream(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n[telemetry]\nexporter = "console"\n')
    lines = [frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": STANDARD_HOST}),
             frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "flood", "arguments": {"count": 1}}})]
    done = subprocess.run(PROXY + ["--rules", str(rules), "--"] + FLOOD, input=b"\n".join(lines) + b"\n",
                          capture_output=True, timeout=30)
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [m.get("method") for m in out if "method" in m] == ["notifications/reminder", "notifications/message"]
    assert '"name": "notifications/message"' in done.stderr.decode()
    assert '"reminder.action": "rewritten"' in done.stderr.decode()
