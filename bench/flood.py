"""A flood against a budget: an MCP server offers 100,000 legacy reminders/s through the stdio
proxy, whose route allows 600 a minute (burst 20) and coalesces the rest by dedupe key.

What must stay bounded: the proxy's CPU (one core at most, and the same cost per reminder at the
end of the flood as at its start) and its memory (what it holds must not grow with the flood:
coalesced reminders are capped by `max_pending_per_session`, budget keys by `max_keys`).  The
server writes as fast as the proxy reads; a blocked write is not made up for, so the offered
rate is what the proxy let through its input, and the host sees only what the budget admits.

The baseline is the same flood through the bare asyncio relay (bench/relay.py): moving the bytes
without looking at them.
"""
from __future__ import annotations

import importlib
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time

from bench.procs import PY, bridge, cpu_seconds, has_proc, relay, rss_kib

SERVER = [PY, "-m", "bench.peers", "mcp-flood"]
RULES = """\
[routes.flood]
protocol = "mcp"
host_dialect = "standard"

[routes.flood.budget]
rate = 600      # per minute
burst = 20
key = "server"
over = "coalesce"
"""


def _flood(argv: list[str], seconds: float, rate: int) -> dict:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    counts = {"reminders": 0, "messages": 0, "lines": 0}
    result: dict = {}
    done = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            counts["lines"] += 1
            if b'"notifications/reminder"' in line:
                counts["reminders"] += 1
            elif b'"notifications/message"' in line:
                counts["messages"] += 1
            elif b'"id":2' in line:
                result.update(json.loads(line)["result"]["structuredContent"])
                done.set()

    threading.Thread(target=read, daemon=True).start()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "bench", "version": "1"},
        "capabilities": {"experimental": {"reminders": {}}}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "flood", "arguments": {"rate": rate, "seconds": seconds, "keys": 1000}}}
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    proc.stdin.flush()
    time.sleep(0.5)  # started and past the handshake
    samples: list[tuple[float, float, int]] = []  # (wall, cpu seconds, rss KiB) of the proxy
    start = time.perf_counter()
    proc.stdin.write(json.dumps(call).encode() + b"\n")
    proc.stdin.flush()
    while not done.wait(0.1):
        samples.append((time.perf_counter() - start, cpu_seconds(proc.pid), rss_kib(proc.pid)))
        if time.perf_counter() - start > seconds + 60:
            raise RuntimeError("the flood never finished")
    samples.append((time.perf_counter() - start, cpu_seconds(proc.pid), rss_kib(proc.pid)))
    proc.stdin.close()
    proc.wait(30)
    half = [s for s in samples if s[0] >= seconds / 2]
    first = [s for s in samples if s[0] < seconds / 2]
    rss_first_second = max((s[2] for s in samples if s[0] <= 1.0), default=samples[0][2])
    cpu = samples[-1][1] - samples[0][1]
    wall = samples[-1][0] - samples[0][0]
    return {
        "offered": result.get("sent", 0), "offered_rate": result.get("rate", 0), "wall": wall, "cpu": cpu,
        "delivered": counts["reminders"], "messages": counts["messages"],
        "cpu_per_1000": cpu / max(result.get("sent", 1), 1) * 1000,
        "cpu_share": cpu / wall if wall else 0.0,
        "cpu_share_first_half": (first[-1][1] - first[0][1]) / (first[-1][0] - first[0][0]) if len(first) > 1 else 0.0,
        "cpu_share_second_half": (half[-1][1] - half[0][1]) / (half[-1][0] - half[0][0]) if len(half) > 1 else 0.0,
        "rss_start_kib": samples[0][2], "rss_after_1s_kib": rss_first_second,
        "rss_peak_kib": max(s[2] for s in samples), "rss_end_kib": samples[-1][2],
        "rss_median_second_half_kib": statistics.median(s[2] for s in half) if half else 0,
    }


def run(quick: bool) -> list[dict]:
    if not has_proc():
        return [{"scenario": "budget flood", "skipped": "needs Linux /proc to read CPU time and resident size"}]
    seconds, rate = (3.0, 100_000) if quick else (10.0, 100_000)
    try:
        importlib.import_module("bridge.policy")  # budgets (spec §7)
    except ImportError:
        return [{"scenario": "budget flood", "skipped": "this build has no bridge.policy (budgets)"}]
    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "flood.toml")
        with open(rules, "w") as out:
            out.write(RULES)
        proxy = _flood(bridge("stdio", "--rules", rules, "--route", "flood", "--") + SERVER,
                       seconds, rate)
    relayed = _flood(relay("--") + SERVER, seconds, rate)
    allowed = 20 + 600 / 60 * proxy["wall"]
    growth = (proxy["rss_peak_kib"] - proxy["rss_after_1s_kib"]) / 1024
    slower = proxy["cpu_share_second_half"] <= 1.05 and proxy["cpu_share"] <= 1.1
    return [{
        "scenario": "budget flood: 100,000 reminders/s offered", "unit": "reminders/s",
        "proxy": f"{proxy['offered_rate']:,.0f}/s taken, {proxy['cpu_per_1000'] * 1000:.0f} µs CPU each",
        "direct": f"{relayed['offered_rate']:,.0f}/s (bare relay, {relayed['cpu_per_1000'] * 1000:.0f} µs each)",
        "ratio": f"CPU {proxy['cpu_share']:.2f} core, RSS +{growth:.1f} MiB after 1 s",
        "goal": "CPU <= 1 core, RSS flat (< +8 MiB after 1 s)",
        "met": slower and growth < 8 and proxy["delivered"] <= allowed + 64,
        "values": {"proxy": proxy, "relay": relayed, "budget_allows": allowed},
        "detail": f"{proxy['offered']:,} reminders in {proxy['wall']:.1f} s against rate 600/min burst 20 "
                  f"(coalesce); host got {proxy['delivered']} (budget allows ~{allowed:.0f}); RSS "
                  f"{proxy['rss_start_kib'] / 1024:.1f} → peak {proxy['rss_peak_kib'] / 1024:.1f} MiB; CPU share "
                  f"{proxy['cpu_share_first_half']:.2f} first half, {proxy['cpu_share_second_half']:.2f} second half",
    }]
