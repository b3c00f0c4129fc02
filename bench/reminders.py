"""Reminder rewrites end to end: legacy reminders from an MCP server, through the proxy as a real
process, to a host that declared standard reminders, as fast as the proxy takes them.

- stdio: `reminder-bridge stdio -- python -m bench.peers mcp-flood`; the server writes legacy
  `notifications/message` lines as fast as the pipe takes them, the host counts
  `notifications/reminder` lines.
- serve: `reminder-bridge serve` in front of `python -m bench.peers mcp-http`, whose `flood` tool
  answers a `tools/call` with an SSE stream of legacy reminders; the host counts rewritten events.

Each runs with spans off (the default), spans on with the console exporter (stderr to /dev/null,
simple processor) and spans on with the OTLP exporter (batch processor) to a local receiver
(`bench.peers otlp-sink`); variants alternate round by round. Rate is reminders the host got per
wall second; CPU is the proxy process's (all threads) per 1,000 reminders.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time

from bench.procs import PY, Process, bridge, cpu_seconds, peer
from bridge.cli import installed

MARK = b'"notifications/reminder"'
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "clientInfo": {"name": "bench", "version": "1"},
    "capabilities": {"experimental": {"reminders": {}}}}}
SPANS = {"off": "", "console": '[telemetry]\nexporter = "console"\n',
         "otlp": '[telemetry]\nexporter = "otlp"\notlp_endpoint = "http://127.0.0.1:{port}"\n'}
STDIO_GOAL = 40_000


def otlp_available() -> bool:
    return installed("opentelemetry.exporter.otlp.proto.http")


def _rules(spans: str, sink: int, directory: str, upstream: str = "") -> list[str]:
    """The proxy's arguments for a variant: a rules file with its `[telemetry]`, the route's
    ``upstream`` for `serve`."""
    if spans == "off":
        return ["--protocol", "mcp", "--upstream", upstream] if upstream else []
    path = os.path.join(directory, f"{spans}-{'serve' if upstream else 'stdio'}.toml")
    with open(path, "w") as out:
        out.write('[routes.default]\nprotocol = "mcp"\n' + (f'upstream = "{upstream}"\n' if upstream else "")
                  + "\n" + SPANS[spans].format(port=sink))
    return ["--rules", path]


def _count(data: bytes, tail: bytes) -> tuple[int, bytes]:
    """Markers in ``tail + data`` (one may straddle two reads), and the new tail."""
    joined = tail + data
    return joined.count(MARK), joined[-(len(MARK) - 1):]


def stdio_once(rules: list[str], seconds: float) -> tuple[float, float]:
    """(reminders/s, proxy CPU seconds per 1,000 reminders) for one flood through `stdio`."""
    proc = subprocess.Popen(bridge("stdio", *rules, "--", PY, "-m", "bench.peers", "mcp-flood"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        line = b""
        while not line.endswith(b"\n"):
            line += proc.stdout.read(1)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "flood", "arguments": {"rate": 10_000_000, "seconds": seconds, "keys": 1000}}}
        used = cpu_seconds(proc.pid)
        started = time.perf_counter()
        proc.stdin.write(json.dumps(call).encode() + b"\n")
        got, tail, buffered = 0, b"", b""
        while True:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                raise RuntimeError("the stdio proxy closed before the flood's answer")
            n, tail = _count(chunk, tail)
            got += n
            buffered = (buffered + chunk)[-4096:]
            if b'"id":2,' in buffered or b'"id": 2,' in buffered:
                break
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(proc.pid) - used
    finally:
        proc.stdin.close()
        proc.wait(30)
    if got == 0:
        raise RuntimeError("no reminder was rewritten")
    return got / elapsed, cpu / got * 1000


async def _sse_once(port: int, count: int) -> tuple[int, float]:
    """(reminders received, seconds) for one `flood` call answered as SSE, on a fresh session."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Mcp-Protocol-Version": "2025-11-25"}
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def post(body: dict, extra: dict) -> bytes:
        """Send one request; returns the answer's header block."""
        data = json.dumps(body).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, **extra}.items())
        writer.write(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Content-Length: {len(data)}\r\n\r\n"
                     .encode() + data)
        return await reader.readuntil(b"\r\n\r\n")

    try:
        head = await post(INIT, {})
        session = next(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                       if line.lower().startswith(b"mcp-session-id:"))
        length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        await reader.readexactly(length)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "flood",
                                                                             "arguments": {"count": count}}}
        started = time.perf_counter()
        head = await post(call, {"Mcp-Session-Id": session})
        if b" 200 " not in head.split(b"\r\n", 1)[0] or b"chunked" not in head.lower():
            raise RuntimeError(f"flood call answered {head[:200]!r}")
        got, tail, last = 0, b"", b""
        while not last.endswith(b"\r\n0\r\n\r\n"):  # the last chunk
            chunk = await reader.read(1 << 20)
            if not chunk:
                raise RuntimeError("the stream closed early")
            n, tail = _count(chunk, tail)
            got += n
            last = (last + chunk)[-16:]
        return got, time.perf_counter() - started
    finally:
        writer.close()


def serve_once(args: list[str], count: int) -> tuple[float, float]:
    """(reminders/s, proxy CPU seconds per 1,000 reminders) for one SSE flood through a fresh `serve`."""
    with Process(bridge("serve", "--listen", "127.0.0.1:0", *args), "stderr") as proxy:
        asyncio.run(_sse_once(proxy.port, 2_000))  # warm-up: imports, first flow
        used = cpu_seconds(proxy.pid)
        got, seconds = asyncio.run(_sse_once(proxy.port, count))
        cpu = cpu_seconds(proxy.pid) - used
    if got != count:
        raise RuntimeError(f"serve rewrote {got} of {count} reminders")
    return got / seconds, cpu / got * 1000


def run(quick: bool) -> list[dict]:
    rounds, seconds, count = (2, 1.0, 20_000) if quick else (4, 2.0, 60_000)
    variants = ["off", "console"] + (["otlp"] if otlp_available() else [])
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as directory, peer("mcp-http") as server, peer("otlp-sink") as sink:
        for r in range(rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for spans in order:
                results.setdefault(("stdio", spans), []).append(stdio_once(_rules(spans, sink.port, directory), seconds))
                serve = _rules(spans, sink.port, directory, f"http://127.0.0.1:{server.port}")
                results.setdefault(("serve", spans), []).append(serve_once(serve, count))
    med = {key: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
           for key, values in results.items()}
    rows = []
    names = {"off": "spans off", "console": "spans on, console exporter to /dev/null",
             "otlp": "spans on, OTLP to a local receiver, batch processor"}
    for transport in ("stdio", "serve"):
        base = med[(transport, "off")][0]
        for spans in variants:
            rate, cpu = med[(transport, spans)]
            if spans == "off" and transport == "stdio":
                ratio, goal, met = f"{rate / STDIO_GOAL:.2f}x goal", f">= {STDIO_GOAL:,}/s", rate >= STDIO_GOAL
            elif spans == "off":
                stdio = med[("stdio", "off")][0]
                ratio, goal, met = f"{rate / stdio:.2f}x stdio", ">= 0.8x stdio's rate, same run", rate >= 0.8 * stdio
            else:
                ratio, goal, met = f"{rate / base:.2f}x spans off", ">= 0.6x spans off", rate >= 0.6 * base
            what = "stdio reminder rewrites, end to end" if transport == "stdio" else "serve reminder rewrites over SSE"
            rows.append({"scenario": f"{what}, {names[spans]}", "unit": "reminders/s",
                         "proxy": f"{rate:,.0f}/s ({cpu:.3f} s CPU per 1k)",
                         "direct": "" if spans == "off" else f"{base:,.0f}/s spans off",
                         "ratio": ratio, "goal": goal, "met": met,
                         "values": {"per_second": rate, "cpu_s_per_1k": cpu,
                                    "rounds": [list(v) for v in results[(transport, spans)]]},
                         "detail": (f"{'flood of ' + str(seconds) + ' s' if transport == 'stdio' else str(count) + ' events'}"
                                    f" per round, median of {rounds} rounds")})
    if not otlp_available():
        rows.append({"scenario": "reminder rewrites, spans on, OTLP exporter",
                     "skipped": "needs pip install 'reminder-bridge[otlp]'"})
    return rows
