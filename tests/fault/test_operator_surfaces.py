"""The operator's surfaces against hostile peers and guessers (issue 19, findings 7, 8 and 12; spec §13).

Each test runs a real `reminder-bridge serve` in front of the real faulty MCP peer
(tests/peers/faulty_http.py), with real HTTP clients and sockets, and failed before the fix:

- a stalled `/api/events` watcher while a peer sends refused 1 MiB bodies and hosts send 2 MiB
  clientInfo names: the proxy's memory stays bounded, the watcher is dropped and counted;
- a host whose clientInfo name (and a peer whose reminder id) carries terminal control sequences:
  `reminder-bridge status` and the log lines show them escaped, never raw;
- a 4-digit admin token guessed by many concurrent requests: only a handful get a verdict, the
  rest a 429 with Retry-After, the right token from another address works at once;
- the admin token in no log line at the most verbose level.
"""
from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import aiohttp
import pytest

from tests.integration.test_console import (LEGACY_HOST_CAPS, STANDARD_HOST_CAPS, Bridge, connect_host, decisions,
                                            read_events, route, rpc, status, status_command, watcher_listed)
from tests.fault.test_serve import sample
from tests.paths import ROOT
from tests.peers.processes import eventually

pytestmark = [pytest.mark.fault,
              pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read the proxy's RSS")]

MiB = 1024 * 1024
#: What a terminal acts on: C0 (but the line ends), DEL, C1, and the bidi controls that reorder a line.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def rss_kib(pid: int) -> int:
    return next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:"))


async def metric(bridge: Bridge, name: str, **labels: str) -> float:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.base}/metrics", headers=bridge.auth) as r:
            assert r.status == 200
            return sample(await r.text(), name, **labels)


def stalled_watcher(port: int) -> socket.socket:
    """A watcher of `/api/events` that never reads a byte (a tiny receive buffer, so the kernel cannot
    hide the stall)."""
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(("127.0.0.1", port))
    stuck.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    return stuck


def closed_by_the_proxy(stuck: socket.socket) -> bool:
    """Read what the proxy sent until it hung up (True), or until it stays silent for 10 s (False)."""
    stuck.settimeout(10)
    try:
        while stuck.recv(1 << 16):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


async def refused_bodies(bridge: Bridge, session: str, count: int, http: aiohttp.ClientSession,
                         per_answer: int = 20) -> None:
    """``count`` legacy reminders with 1 MiB bodies from the peer: each over max_body_bytes (4096)."""
    for i in range(count // per_answer):
        _, answer = await rpc(bridge.url, 100 + i, "remind", {"count": per_answer, "size": MiB}, session, http=http)
        assert answer[-1].get("result"), answer[-1]
        assert not [m for m in answer if m.get("method")], "a refused reminder reached the host"


async def test_a_stalled_watcher_pins_no_peer_data_and_is_dropped_and_counted(tmp_path):
    bridge = Bridge(tmp_path)  # no budget: every reminder is a decision; default trust: bodies up to 4096 bytes
    pid = bridge.proxy.proc.pid
    stuck = None
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
            session = await connect_host(bridge.url, "flood-host", STANDARD_HOST_CAPS, http=http)
            await refused_bodies(bridge, session, 40, http)  # warm up: the parser's buffers reach their size

            # what a watcher is sent: summaries (a size, a shortened name), never the peer's text
            async with http.get(f"{bridge.base}/api/events") as reader:
                await read_events(reader, lambda r: r)
                await rpc(bridge.url, 7, "remind", {"count": 1, "size": MiB}, session, http=http)
                await connect_host(bridge.url, "n" * (2 * MiB), LEGACY_HOST_CAPS, http=http)
                got = await read_events(reader, lambda r: any(e == "handshake" and d["side"] == "host"
                                                              for e, d in r))
            [refused] = [d for d in decisions(got) if d["action"] == "refused"]
            assert refused["size"] == MiB and "body" not in refused
            [named] = [d for e, d in got if e == "handshake" and d["side"] == "host"]
            assert named["client"].startswith("nnn") and len(named["client"]) <= 256

            before, since = rss_kib(pid), time.time()
            stuck = stalled_watcher(bridge.admin)
            await eventually(lambda: watcher_listed(bridge, since))
            peak = [before]

            async def watch_rss() -> None:
                while True:
                    peak.append(rss_kib(pid))
                    await asyncio.sleep(0.1)  # the sampling rate, not synchronisation

            sampler = asyncio.ensure_future(watch_rss())
            try:
                await refused_bodies(bridge, session, 1200, http)
                for i in range(200):
                    await connect_host(bridge.url, f"{i}-" + "n" * (2 * MiB), LEGACY_HOST_CAPS, http=http)
                peak.append(rss_kib(pid))
            finally:
                sampler.cancel()
            grown = max(peak) - before
            assert grown < 64 * 1024, f"RSS grew by {grown} KiB while a watcher stalled (samples {peak[::10]})"

            # the stalled watcher is dropped (more decisions overflow its queue if it has not been yet),
            # and the drop is counted
            async def dropped() -> float:
                found = await metric(bridge, "reminder_bridge_console_watchers_dropped_total")
                if not found:
                    await rpc(bridge.url, 9, "remind", {"count": 200}, session, http=http)
                return found

            assert await eventually(dropped, timeout=60) == 1
            assert await asyncio.to_thread(closed_by_the_proxy, stuck)
            feed = (await status(bridge))["feed"]
            assert not await watcher_listed(bridge, since)
            assert feed["dropped"] == 1 and feed["lost"] >= 1
            assert await metric(bridge, "reminder_bridge_console_events_lost_total") == feed["lost"]
            # the feed still serves the next watcher
            async with http.get(f"{bridge.base}/api/events") as reader:
                await read_events(reader, lambda r: r)
                await rpc(bridge.url, 11, "remind", {"count": 2}, session, http=http)
                got = await read_events(reader, lambda r: len(decisions(r)) >= 2)
            assert [d["action"] for d in decisions(got)] == ["rewritten", "rewritten"]
    finally:
        if stuck is not None:
            stuck.close()
        bridge.stop()


# -- control characters ------------------------------------------------------------------------------------
#: A host name that, printed raw, sets the terminal's title, clears the screen, and writes a fake verdict
#: in red over the real one (ESC, BEL, CSI, an 8-bit CSI, DEL, a right-to-left override).
HOSTILE_NAME = "evil\x1b]0;owned\x07\x1b[2J\x1b[H\rready for enforce: yes\x9b31m\x7f\u202eend"


async def test_control_characters_from_peers_reach_no_terminal_raw(tmp_path):
    bridge = Bridge(tmp_path)
    try:
        await connect_host(bridge.url, HOSTILE_NAME, LEGACY_HOST_CAPS)
        session = await connect_host(bridge.url, "modern", STANDARD_HOST_CAPS)
        # a reminder refused for its size, whose id is logged (at the default level) with the decision
        await rpc(bridge.url, 5, "remind", {"count": 1, "size": 5000, "id": "id\x1b]0;log\x07\x9b2J\x85"}, session)

        data = await status(bridge)  # JSON carries the name as it came: a JSON reader sees no raw byte
        assert route(data)["readiness"]["legacy_hosts"] == [HOSTILE_NAME]
        done = await asyncio.to_thread(subprocess.run, [*status_command(), "--admin", bridge.base],
                                       capture_output=True, timeout=30, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        text = done.stdout.decode()
        assert not RAW_CONTROL.search(text), repr(text)
        assert r"evil\x1b]0;owned\x07\x1b[2J\x1b[H\x0dready for enforce: yes\x9b31m\x7f\u202eend" in text, text
        [row] = [line for line in text.splitlines() if line.startswith("ci ")]
        assert "no — 1 legacy host seen" in row

        async def refusal_logged() -> list[str]:
            return [line for line in bridge.proxy.stderr if '"refused"' in line]

        [line] = await eventually(refusal_logged)
        assert not [line for line in bridge.proxy.stderr if RAW_CONTROL.search(line)], bridge.proxy.stderr
        assert json.loads(line)["id"] == "id\x1b]0;log\x07\x9b2J\x850"  # escaped, and still the same value as JSON
    finally:
        bridge.stop()


# -- guessing the admin token --------------------------------------------------------------------------------
PIN = "4821"


async def guess(kind: str, base: str, address: str, tokens: list[str]) -> tuple[Counter, list[str]]:
    """Every token of ``tokens`` tried at once (100 in flight) from ``address``, as a bearer token, a
    sign-in form or a `?token=` link; returns the statuses and the Retry-After of each 429."""
    statuses: Counter = Counter()
    retry_after: list[str] = []
    connector = aiohttp.TCPConnector(limit=100, local_addr=(address, 0))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
        async def one(token: str) -> None:
            if kind == "bearer":
                request = http.get(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"})
            elif kind == "login":
                request = http.post(f"{base}/login", data={"token": token}, allow_redirects=False)
            else:
                request = http.get(f"{base}/?token={token}", allow_redirects=False)
            async with request as r:
                await r.read()
                statuses[r.status] += 1
                if r.status == 429:
                    retry_after.append(r.headers.get("Retry-After", ""))

        await asyncio.gather(*(one(t) for t in tokens))
    return statuses, retry_after


async def test_guessing_the_admin_token_is_throttled_per_address_and_the_right_one_still_works(tmp_path):
    bridge = Bridge(tmp_path, token=PIN)
    try:
        wrong = [f"{n:04d}" for n in range(10_000) if f"{n:04d}" != PIN]
        throttled = 0
        for kind, address, tokens in (("bearer", "127.0.0.2", wrong[:2000]), ("login", "127.0.0.3", wrong[:300]),
                                      ("link", "127.0.0.4", wrong[:300])):
            statuses, retry_after = await guess(kind, bridge.base, address, tokens)
            verdicts = statuses[401]
            # 5 free, then one per lock-out, each twice as long as the last: a handful, however slow the run
            assert verdicts <= 16 and statuses[429] == len(tokens) - verdicts, (kind, statuses)
            assert all(value.isdigit() and int(value) >= 1 for value in retry_after), (kind, set(retry_after))
            throttled += statuses[429]
            # from the guessing address, even the right token gets no verdict now
            [(code, _)] = (await guess(kind, bridge.base, address, [PIN]))[0].items()
            assert code == 429, kind
            throttled += 1
        # from another address the right token works at once, the first time
        statuses, _ = await guess("bearer", bridge.base, "127.0.0.5", [PIN])
        assert statuses == {200: 1}
        statuses, _ = await guess("link", bridge.base, "127.0.0.6", [PIN])
        assert statuses == {303: 1}
        assert await metric(bridge, "reminder_bridge_admin_auth_failures_total", outcome="throttled") == throttled
        assert await metric(bridge, "reminder_bridge_admin_auth_failures_total", outcome="wrong") >= 3
    finally:
        bridge.stop()


async def test_the_admin_token_appears_in_no_log_line_at_any_level(tmp_path):
    token = "T0ken-that-must-never-be-logged-7f3a"
    bridge = Bridge(tmp_path, token=token, args=("--log-level", "debug"))
    try:
        base = bridge.base
        session = await connect_host(bridge.url, "modern", STANDARD_HOST_CAPS)
        await rpc(bridge.url, 2, "remind", {"count": 2}, session)
        async with aiohttp.ClientSession() as http:
            for url in (f"{base}/?token={token}", f"{base}/?token={token}x"):
                async with http.get(url, allow_redirects=False) as r:
                    assert r.status in (303, 401)
            for given in (token, token[:-1]):
                async with http.post(f"{base}/login", data={"token": given}, allow_redirects=False) as r:
                    assert r.status in (303, 401)
            for given in (token, "wrong"):
                async with http.get(f"{base}/api/status", headers={"Authorization": f"Bearer {given}"}) as r:
                    assert r.status in (200, 401)
        done = await asyncio.to_thread(subprocess.run, [*status_command(), "--admin", base, "--token", token],
                                       capture_output=True, text=True, timeout=30, cwd=ROOT)
        assert done.returncode == 0, done.stderr
    finally:
        bridge.stop()
    logged = "\n".join(bridge.proxy.stderr)
    [console] = [json.loads(line) for line in bridge.proxy.stderr if '"event": "console"' in line]
    assert console["url"] == f"{base}/" and "[admin] token" in console["why"]
    assert '"level": "debug"' in logged or '"level": "info"' in logged  # the verbose lines are there
    assert token not in logged and token[:-1] not in logged
