"""A2A streaming: `SendStreamingMessage` through `reminder-bridge serve` vs straight to the agent.

The agent answers with an SSE stream: a task, then status updates a few milliseconds apart, each
stamped with the system's monotonic clock when the agent wrote it; the caller stamps arrival with
the same clock, so each event's latency is measured end to end without clock skew.  Time to first
event runs from sending the request to the first `data:` line.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid

from bench.procs import pct, peer, proxy_serve


async def _stream(http, port: int, events: int, interval: float) -> tuple[float, list[float]]:
    """One streaming call: (time to first event in µs, per-event latencies in µs)."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "SendStreamingMessage", "params": {
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "go"}]},
        "metadata": {"events": events, "interval": interval}}}
    first = None
    per_event = []
    start = time.perf_counter()
    async with http.post(f"http://127.0.0.1:{port}/a2a", json=body,
                         headers={"A2A-Version": "1.0", "Accept": "text/event-stream"}) as response:
        async for line in response.content:
            if not line.startswith(b"data:"):
                continue
            arrived = time.monotonic_ns()
            if first is None:
                first = (time.perf_counter() - start) * 1e6
            frame = json.loads(line[5:])
            if "error" in frame:
                raise RuntimeError(f"stream failed: {frame}")
            sent = ((frame["result"].get("statusUpdate") or {}).get("metadata") or {}).get("sentNs")
            if sent is not None:
                per_event.append((arrived - sent) / 1000)
    if first is None or len(per_event) != events:
        raise RuntimeError(f"stream on port {port} ended early: {len(per_event)} of {events} events")
    return first, per_event


def run(quick: bool) -> list[dict]:
    streams = 40 if quick else 200
    events, interval = 20, 0.002
    rounds = 2 if quick else 4
    with peer("a2a") as agent, proxy_serve("--protocol", "a2a", "--upstream",
                                           f"http://127.0.0.1:{agent.port}") as bridge:
        return asyncio.run(_run(agent.port, bridge.port, streams, events, interval, rounds))


async def _run(direct_port: int, proxy_port: int, streams: int, events: int, interval: float,
               rounds: int) -> list[dict]:
    import aiohttp

    ports = {"direct": direct_port, "proxy": proxy_port}
    first: dict[str, list[float]] = {"direct": [], "proxy": []}
    each: dict[str, list[float]] = {"direct": [], "proxy": []}
    async with aiohttp.ClientSession() as http:
        for port in ports.values():  # warm-up
            for _ in range(5):
                await _stream(http, port, events, interval)
        for r in range(rounds):
            order = ("direct", "proxy") if r % 2 == 0 else ("proxy", "direct")
            for side in order:
                for _ in range(streams // rounds):
                    ttfe, latencies = await _stream(http, ports[side], events, interval)
                    first[side].append(ttfe)
                    each[side] += latencies
    rows = []
    for name, samples, unit_note in (("A2A streaming time to first event", first, "streams"),
                                     ("A2A streaming per-event added latency", each, "events")):
        p50 = {s: statistics.median(v) / 1000 for s, v in samples.items()}
        p99 = {s: pct(v, 0.99) / 1000 for s, v in samples.items()}
        added50, added99 = p50["proxy"] - p50["direct"], p99["proxy"] - p99["direct"]
        rows.append({
            "scenario": name, "unit": "ms",
            "proxy": f"p50 {p50['proxy']:.2f} / p99 {p99['proxy']:.2f}",
            "direct": f"p50 {p50['direct']:.2f} / p99 {p99['direct']:.2f}",
            "ratio": f"{added50:+.2f} p50 / {added99:+.2f} p99",
            "goal": "<= +0.5 ms p50, <= +2 ms p99", "met": added50 <= 0.5 and added99 <= 2.0,
            "values": {"proxy_p50_ms": p50["proxy"], "proxy_p99_ms": p99["proxy"], "direct_p50_ms": p50["direct"],
                       "direct_p99_ms": p99["direct"], "added_p50_ms": added50, "added_p99_ms": added99},
            "detail": f"{len(samples['proxy'])} {unit_note} per side ({events} status updates {interval * 1000:g} ms "
                      f"apart per stream), {rounds} alternating rounds; hand-written agent (bench/peers.py)",
        })
    return rows
