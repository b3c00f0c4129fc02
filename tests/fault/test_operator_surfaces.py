"""The operator's surfaces against hostile peers and guessers (issue 19, findings 7, 8 and 12; SPEC §13).

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
                                            read_events, route, rpc, status, status_command)
from tests.fault.test_serve import sample
from tests.paths import ROOT
from tests.peers.processes import eventually

pytestmark = [pytest.mark.fault,
              pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read the proxy's RSS")]

MiB = 1024 * 1024
#: What a terminal acts on: C0 (but the line ends), DEL, C1, and the bidi controls that reorder a line.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


async def metric(bridge: Bridge, name: str, **labels: str) -> float:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bridge.base}/metrics", headers=bridge.auth) as r:
            assert r.status == 200
            return sample(await r.text(), name, **labels)


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
