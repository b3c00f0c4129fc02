"""Hosts as they really behave, and counts with time in them (issue 22): the official `mcp` SDK's
client pinned to 2026-07-28, through a real `reminder-bridge serve`, to a real legacy server.
That client carries its envelope on every request, each its own stateless session; the console
and `reminder-bridge status` count it as one host, with "since" stamps and the last hour per
minute, and a route nothing reached says "no traffic yet"."""
from __future__ import annotations

import asyncio
import subprocess

import aiohttp
import pytest
from mcp import Client
from mcp.types import Implementation

from tests.integration.test_console import get_json, route, status_command, wait_listening
from tests.paths import ROOT
from tests.peers.mcp_host import Reminders
from tests.peers.processes import free_port, peer, proxy


async def test_one_stateless_sdk_client_is_one_host_and_the_last_hour_is_charted(tmp_path):
    """Issue 22: the official SDK client pinned to 2026-07-28 carries its envelope on every request
    (each its own stateless session); six requests are six handshakes, and one host.  A route no
    traffic reached says "no traffic yet"; the status has "since" stamps and per-minute series."""
    upstream = peer("tests.peers.mcp_legacy_http", "--event-delay", "0.0")
    admin = free_port()
    rules = tmp_path / "rules.toml"
    rules.write_text("".join(f'[routes.{name}]\nprotocol = "mcp"\npath = "/{name}"\n'
                             f'upstream = "http://127.0.0.1:{upstream.port}/mcp"\n' for name in ("ci", "idle"))
                     + f'[routes.ci.budget]\nrate = 60\nburst = 20\n[admin]\nlisten = "127.0.0.1:{admin}"\n')
    running = proxy("--rules", str(rules))
    base = f"http://127.0.0.1:{admin}"
    try:
        wait_listening(admin)
        before = await get_json(f"{base}/api/status")
        assert route(before)["readiness"]["verdict"] == "no traffic yet"
        ext = Reminders()
        async with Client(f"http://127.0.0.1:{running.port}/ci", mode="2026-07-28", extensions=[ext], cache=None,
                          client_info=Implementation(name="sdk-host", version="2.3.0")) as client:
            for path in ("a.py", "b.py", "c.py"):
                await client.call_tool("touch_file", {"path": path})
            for text in ("one", "two", "three"):
                await client.call_tool("echo", {"text": text})
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{upstream.port}/stats") as r:
                requests = (await r.json())["posts"]
        data = await get_json(f"{base}/api/status")
        ci, idle = route(data), route(data, "idle")
        table = await asyncio.to_thread(subprocess.run, [*status_command(), "--admin", base], capture_output=True,
                                        text=True, timeout=30, cwd=ROOT)
    finally:
        running.stop()
        upstream.stop()
    rows = {line.split()[0]: line for line in table.stdout.splitlines()}
    assert rows["ci"].split()[:5] == ["ci", "mcp", "translate", "1/0/0", "-"], table.stdout  # hosts, not requests
    assert "no traffic yet — no host has connected" in rows["idle"], table.stdout
    assert requests >= 6 and len(ext.received) == 3  # six calls (and the SDK's own tools/list)
    ready = ci["readiness"]
    assert ready["host_handshakes"] == {"standard": requests, "legacy": 0, "none": 0}
    assert ready["hosts"] == {"standard": 1, "legacy": 0, "none": 0}
    assert ready["text"] == ("ready for enforce: yes — no legacy host since start-up: 1 host (1 standard), "
                             "no legacy reminder from the host side")
    assert (ci["dialects"]["host"]["standard"]["count"], ci["dialects"]["host"]["standard"]["hosts"]) == (requests, 1)
    assert [(c["name"], c["hosts"], c["count"]) for c in ci["clients"]["host"]] == [("sdk-host", 1, requests)]
    assert idle["readiness"]["text"] == ("no traffic yet — no host has connected and no reminder has passed since "
                                         "the route started")
    assert idle["readiness"]["ready"] is None
    # "since" stamps, and the last hour per minute (the current minute last)
    assert data["since"] <= ci["since"] <= data["time"] and data["series_s"] == 3600
    assert ready["since_start_up"] is True and ready["since"] <= data["time"]  # up for less than the 24 h window
    assert "window: the last 24 h (the proxy started " in table.stdout, table.stdout
    series = ci["series"]
    assert series["minutes"] == 60 and series["start"] == pytest.approx(data["time"] - data["time"] % 60 - 59 * 60)
    assert series["actions"]["rewritten"][-1] >= 3 and sum(series["actions"]["rewritten"]) == ci["actions"]["rewritten"]
    [budget] = series["budgets"]
    assert (budget["kind"], budget["limit"], len(budget["tokens"])) == ("server", 20, 60)
    assert [t for t in budget["tokens"][-2:] if t is not None]  # read at start-up (and every 5 s since)
    assert budget["now"] < 20  # ... and now, after 3 charges
    assert idle["series"]["actions"] == {} and idle["series"]["budgets"] == []
