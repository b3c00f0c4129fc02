"""`python -m bench --peers`: other MCP proxies, when installed, side by side with reminder-bridge
in the same scenarios: FastMCP's `create_proxy` (bench/fastmcp_proxy.py). A peer that is not
installed gets a row saying so.

For each proxy, in front of the same servers (bench/peers.py):
- CPU per `tools/call` at 10 keep-alive clients, and p50 latency with one client;
- resident memory per MCP session (100 sessions initialised, RSS before and after);
- whether reminders survive: 20 legacy reminders sent by a stdio server (`notifications/message`)
  and by an HTTP server (SSE events on a `tools/call`): how many reach the host, and in which form.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import subprocess
import time

from bench.load import closed_loop, connect, post
from bench.mcp_http import HEADERS, open_session
from bench.procs import PY, Process, bridge, cpu_seconds, peer, proxy_serve, rss_kib

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "clientInfo": {"name": "bench", "version": "1"},
    "capabilities": {"experimental": {"reminders": {}}}}}
REMINDERS = 20
PROXIES = {"reminder-bridge": None, "FastMCP proxy": "fastmcp"}  # name: the module that must be installed


def _http_proxy(name: str, upstream: str) -> Process:
    if name == "reminder-bridge":
        return proxy_serve("--protocol", "mcp", "--upstream", upstream)
    return Process([PY, "-m", "bench.fastmcp_proxy", "http", upstream + "/mcp"], "stdout")


def _stdio_proxy(name: str, server: list[str]) -> list[str]:
    if name == "reminder-bridge":
        return bridge("stdio", "--", *server)
    return [PY, "-m", "bench.fastmcp_proxy", "stdio", "--", *server]


def _call(port: int, session: str, name: str, arguments: dict, call_id: int) -> bytes:
    """A `tools/call` request (ids unique per session: a proxy may match answers by id)."""
    return post(port, "/mcp", json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments}}).encode(), {**HEADERS, "Mcp-Session-Id": session})


def _check(status: int, body: bytes) -> None:
    if status != 200 or b'"result"' not in body:
        raise RuntimeError(f"tools/call failed: {status} {body[:300]!r}")


def _survived(data: bytes) -> str:
    """How many of the reminders reached the host, and in which form (``data``: JSON lines, or SSE)."""
    standard = intact = text = 0
    for line in data.split(b"\n"):
        start = line.find(b"{")
        if start < 0 or b"Build " not in line:
            continue
        msg = json.loads(line[start:])
        params = msg.get("params") or {}
        if msg.get("method") == "notifications/reminder":
            standard += 1
        elif ((params.get("_meta") or {}).get("harn") or {}).get("reminder"):
            intact += 1
        else:
            text += 1
    if standard:
        return f"{standard}/{REMINDERS} as standard notifications/reminder"
    if intact:
        return f"{intact}/{REMINDERS} legacy, passed through intact"
    if text:
        return f"0/{REMINDERS}: {text} log lines kept the text, the reminder (_meta: id, dedupeKey) was dropped"
    return f"0/{REMINDERS}: nothing reached the host"


async def _http(port: int, pid: int, calls: int, seconds: float) -> dict:
    session = await open_session(port)
    conn = await connect(port)
    try:
        samples = []
        for i in range(calls):
            started = time.perf_counter()
            status, _, body = await conn.request(_call(port, session, "echo", {"text": f"hi {i}"}, i + 1))
            samples.append((time.perf_counter() - started) * 1e3)
            _check(status, body)
        status, _, flood = await conn.request(_call(port, session, "flood", {"count": REMINDERS}, 0))
    finally:
        conn.close()
    used, started = cpu_seconds(pid), time.perf_counter()
    done, _ = await closed_loop(port, lambda i: _call(port, session, "echo", {"text": f"x{i}"}, calls + 1 + i), 10, seconds, _check)
    cpu_us = (cpu_seconds(pid) - used) / max(done, 1) * 1e6
    before = rss_kib(pid)
    for _ in range(100):
        await open_session(port)
    per_session = (rss_kib(pid) - before) * 1024 / 100
    return {"p50_ms": statistics.median(samples), "cpu_us": cpu_us, "calls_per_s": done / (time.perf_counter() - started),
            "bytes_per_session": per_session, "http_reminders": _survived(flood)}


def _stdio_reminders(argv: list[str]) -> str:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        proc.stdin.flush()
        proc.stdout.readline()
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + json.dumps({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "flood", "arguments": {
                "rate": REMINDERS * 10, "seconds": 0.1, "keys": REMINDERS}}}).encode() + b"\n")
        proc.stdin.flush()
        got = b""
        while line := proc.stdout.readline():
            got += line
            if line.startswith(b'{"jsonrpc":"2.0","id":2') or b'"id":2,' in line or b'"id": 2,' in line:
                break
        return _survived(got)
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(quick: bool) -> list[dict]:
    calls, seconds = (50, 2.0) if quick else (200, 5.0)
    rows = []
    with peer("mcp-http") as server:
        upstream = f"http://127.0.0.1:{server.port}"
        for name, module in PROXIES.items():
            if module is not None and importlib.util.find_spec(module) is None:
                rows.append({"scenario": f"peers: {name}", "skipped": f"not installed (pip install {module})"})
                continue
            with _http_proxy(name, upstream) as proxy:
                try:
                    got = asyncio.run(asyncio.wait_for(_http(proxy.port, proxy.pid, calls, seconds), 300))
                except (TimeoutError, RuntimeError, ConnectionError) as exc:
                    rows.append({"scenario": f"peers: {name}", "skipped": f"failed over HTTP: {exc!r}"[:200]})
                    continue
            got["stdio_reminders"] = _stdio_reminders(_stdio_proxy(name, [PY, "-m", "bench.peers", "mcp-flood"]))
            rows.append({
                "scenario": f"peers: {name}", "unit": "µs CPU per call",
                "proxy": f"{got['cpu_us']:,.0f} µs CPU/call, p50 {got['p50_ms']:.2f} ms, "
                         f"{got['bytes_per_session'] / 1024:.1f} KiB/session",
                "direct": f"reminders: stdio {got['stdio_reminders']}; HTTP {got['http_reminders']}",
                "ratio": f"{got['calls_per_s']:.0f} calls/s at 10 clients", "goal": "(reported)", "met": None,
                "values": got})
    return rows
