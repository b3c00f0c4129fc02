"""MCP Streamable HTTP: `tools/call` through `reminder-bridge serve` vs straight to the server, with a
bare aiohttp reverse proxy (bench/http_relay.py) measured beside them as the floor of the design.

One warm 2025-11-25 session per side (initialize first, then `Mcp-Session-Id` on every call),
a host that declares standard reminder support, a server that declares Harn's: the proxy's
ordinary case, where a tool call and its result need no rewrite.  Added latency is measured with
one client; throughput with 1, 10 and 100 concurrent keep-alive connections, in alternating rounds.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import time

import importlib.util
import shutil
import subprocess
import tempfile
from contextlib import ExitStack, contextmanager

from bench.load import closed_loop, connect, header, post
from bench.procs import Process, bridge, on_loop, pct, peer, proxy_serve, relay_http, tree_cpu_seconds
from bridge.loop import loop_name

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "Mcp-Protocol-Version": "2025-11-25"}


#: what a host that understands standard reminders declares
STANDARD_HOST = {"experimental": {"reminders": {}}}


async def open_session(port: int) -> str:
    """A warm 2025-11-25 MCP session on ``port`` (initialize, then initialized): its id."""
    session, _ = await handshake(port)
    if not session:
        raise RuntimeError(f"initialize on port {port} gave no Mcp-Session-Id")
    return session


async def handshake(port: int, capabilities: dict | None = None) -> tuple[str, str]:
    """initialize (declaring ``capabilities``, by default standard reminders), then initialized:
    the session id ("" from a stateless server) and the protocol version the server chose. The
    answer may be JSON or SSE (other proxies choose)."""
    conn = await connect(port)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "clientInfo": {"name": "bench", "version": "1"},
            "capabilities": STANDARD_HOST if capabilities is None else capabilities}}).encode()
        status, head, answer = await conn.request(post(port, "/mcp", body, HEADERS))
        if status != 200 or b'"result"' not in answer:
            raise RuntimeError(f"initialize on port {port} failed: {status} {answer[:200]!r}")
        session = header(head, "Mcp-Session-Id") or ""
        chosen = next(m["result"]["protocolVersion"] for m in messages(answer) if "result" in m)
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        await conn.request(post(port, "/mcp", note, session_headers(session, chosen)))
        return session, chosen
    finally:
        conn.close()


def messages(body: bytes) -> list[dict]:
    """The JSON-RPC messages of an answer: a JSON body, or every `data:` line of an SSE one."""
    if body.lstrip().startswith((b"{", b"[")):
        found = json.loads(body)
        return found if isinstance(found, list) else [found]
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data:") and line[5:].strip().startswith(b"{"):
            out.append(json.loads(line[5:]))
    return out


def session_headers(session: str, version: str = "2025-11-25") -> dict[str, str]:
    """The headers of every request after initialize (no session id toward a stateless server)."""
    return {**HEADERS, "Mcp-Protocol-Version": version, **({"Mcp-Session-Id": session} if session else {})}


#: a `tools/call` after its id
CALL = b',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the bench"}}}'


def _maker(port: int, session: str):
    return request_maker(port, session_headers(session))


def request_maker(port: int, headers: dict[str, str], after: bytes = CALL):
    """Request ``i`` as raw HTTP: a POST to /mcp with ``headers``, the JSON-RPC id ``i + 1``, then ``after``."""
    head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())).encode()
    before = b'{"jsonrpc":"2.0","id":'

    def make(i: int) -> bytes:
        body = before + str(i + 1).encode() + after
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    return make


def _check(status: int, body: bytes) -> None:
    if status != 200 or b'"result"' not in body:
        raise RuntimeError(f"tools/call failed: {status} {body[:300]!r}")


async def call_latencies(port: int, make, count: int) -> list[float]:
    """``count`` requests made by ``make``, one at a time on one connection: µs each."""
    conn = await connect(port)
    samples = []
    try:
        for i in range(count):
            raw = make(i)
            start = time.perf_counter()
            status, _, body = await conn.request(raw)
            samples.append((time.perf_counter() - start) * 1e6)
            _check(status, body)
    finally:
        conn.close()
    return samples


async def _throughput(port: int, session: str, clients: int, seconds: float) -> tuple[float, list[float]]:
    start = time.perf_counter()
    count, latencies = await closed_loop(port, _maker(port, session), clients, seconds, _check)
    return count / (time.perf_counter() - start), latencies


#: what bounds HTTP throughput, at 100 clients: the proxy and the bare aiohttp relay on each loop, and
#: `serve --workers 2` (which needs shared state: a redis-server and the redis client)
VARIANTS = {"proxy, asyncio": ("proxy", "asyncio"), "proxy, uvloop": ("proxy", "uvloop"),
            "proxy, --workers 2": ("workers", None), "bare aiohttp relay, uvloop": ("relay", "uvloop")}


@contextmanager
def redis_server():
    """A throwaway redis-server on a free port (the shared state `--workers` needs), or None."""
    binary = shutil.which("redis-server")
    if binary is None or importlib.util.find_spec("redis") is None:
        yield None
        return
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                 "no", "--dir", directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)


def _variant(kind: str, loop: str | None, upstream: str, state: str | None) -> Process | str:
    """The process of one variant, or why it cannot run here."""
    if loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        return "needs uvloop (pip install 'reminder-bridge[fast]')"
    if kind == "relay":
        return Process(relay_http(upstream), "stdout", env=on_loop(loop))
    if kind == "proxy":
        return proxy_serve("--protocol", "mcp", "--upstream", upstream, env=on_loop(loop))
    if state is None:
        return "needs shared state: redis-server on PATH and pip install 'reminder-bridge[redis]'"
    try:
        return Process(bridge("serve", "--listen", "127.0.0.1:0", "--workers", "2", "--state", state, "--protocol",
                              "mcp", "--upstream", upstream), "stderr")
    except RuntimeError as exc:
        return f"did not start: {str(exc)[-200:]}"


def run(quick: bool) -> list[dict]:
    rounds = 2 if quick else 4
    trips = 400 if quick else 2000
    seconds = 1.0 if quick else 3.0
    concurrency = (1, 10, 100)
    upstream = "http://127.0.0.1:{}"
    with ExitStack() as stack:
        server = stack.enter_context(peer("mcp-http"))
        proxy = stack.enter_context(proxy_serve("--protocol", "mcp", "--upstream", upstream.format(server.port)))
        bare = stack.enter_context(Process(relay_http(upstream.format(server.port)), "stdout"))
        ports = {"direct": server.port, "proxy": proxy.port, "relay": bare.port}
        pids = {"direct": server.pid, "proxy": proxy.pid, "relay": bare.pid}
        state = stack.enter_context(redis_server())
        skipped = {}
        for name, (kind, loop) in VARIANTS.items():
            started = _variant(kind, loop, upstream.format(server.port), state)
            if isinstance(started, str):
                skipped[name] = started
                continue
            stack.enter_context(started)
            ports[name], pids[name] = started.port, started.pid
        return asyncio.run(_run(ports, pids, rounds, trips, seconds, concurrency)) + _variant_rows(skipped)


async def _run(ports: dict[str, int], pids: dict[str, int], rounds: int, trips: int, seconds: float,
               concurrency: tuple[int, ...]) -> list[dict]:
    """Three sides in alternating order each round: the server direct, through the proxy, and
    through a bare aiohttp reverse proxy (bench/http_relay.py), the floor of the proxy's design."""
    sides = {side: (port, await open_session(port)) for side, port in ports.items()}
    for port, session in sides.values():  # warm-up: connections, caches, the proxy's first flow
        await call_latencies(port, _maker(port, session), 200)
        await _throughput(port, session, 10, 0.3)
    base = ("direct", "proxy", "relay")  # the other sides run only at 100 clients
    lat: dict[str, list[float]] = {side: [] for side in base}
    rate: dict[tuple[str, int], list[float]] = {}
    loaded: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}  # µs of CPU per call of that side's process
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]  # alternate who goes first
        for side in order:
            port, session = sides[side]
            if side in base:
                lat[side] += await call_latencies(port, _maker(port, session), trips)
            for clients in concurrency if side in base else (100,):
                used = tree_cpu_seconds(pids[side])
                started = time.perf_counter()
                per_second, latencies = await _throughput(port, session, clients, seconds)
                calls = per_second * (time.perf_counter() - started)
                cpu.setdefault((side, clients), []).append((tree_cpu_seconds(pids[side]) - used) / calls * 1e6)
                rate.setdefault((side, clients), []).append(per_second)
                loaded.setdefault((side, clients), []).extend(latencies)
    p50 = {s: statistics.median(v) for s, v in lat.items()}
    p99 = {s: pct(v, 0.99) for s, v in lat.items()}
    added50, added99 = (p50["proxy"] - p50["direct"]) / 1000, (p99["proxy"] - p99["direct"]) / 1000
    relay50, relay99 = (p50["relay"] - p50["direct"]) / 1000, (p99["relay"] - p99["direct"]) / 1000
    rows = [{
        "scenario": "MCP HTTP tools/call added latency (1 client)", "unit": "ms",
        "proxy": f"p50 {p50['proxy'] / 1000:.2f} / p99 {p99['proxy'] / 1000:.2f}",
        "direct": f"p50 {p50['direct'] / 1000:.2f} / p99 {p99['direct'] / 1000:.2f}",
        "ratio": f"{added50:+.2f} p50 / {added99:+.2f} p99", "goal": "<= +0.5 ms p50, <= +2 ms p99",
        "met": added50 <= 0.5 and added99 <= 2.0,
        "values": {"proxy_p50_us": p50["proxy"], "proxy_p99_us": p99["proxy"], "direct_p50_us": p50["direct"],
                   "direct_p99_us": p99["direct"], "added_p50_ms": added50, "added_p99_ms": added99,
                   "relay_added_p50_ms": relay50, "relay_added_p99_ms": relay99},
        "detail": f"{len(lat['proxy'])} sequential calls per side on one keep-alive connection, "
                  f"{rounds} alternating rounds; warm 2025-11-25 session; a bare aiohttp reverse proxy adds "
                  f"{relay50:+.2f} p50 / {relay99:+.2f} p99",
    }]
    for clients in concurrency:
        p, d = statistics.median(rate[("proxy", clients)]), statistics.median(rate[("direct", clients)])
        bare = statistics.median(rate[("relay", clients)])
        lp, ld = loaded[("proxy", clients)], loaded[("direct", clients)]
        cpu_proxy, cpu_server = statistics.median(cpu[("proxy", clients)]), statistics.median(cpu[("direct", clients)])
        cpu_relay = statistics.median(cpu[("relay", clients)])
        rows.append({
            "scenario": f"MCP HTTP tools/call throughput ({clients} client{'s' if clients > 1 else ''})",
            "unit": "calls/s", "proxy": f"{p:.0f} calls/s", "direct": f"{d:.0f} calls/s",
            "ratio": f"{p / d:.2f}x", "goal": ">= 0.7x direct", "met": p / d >= 0.7,
            "values": {"proxy": p, "direct": d, "ratio": p / d, "relay": bare, "relay_ratio": bare / d,
                       "proxy_p50_ms": statistics.median(lp) / 1000, "proxy_p99_ms": pct(lp, 0.99) / 1000,
                       "direct_p50_ms": statistics.median(ld) / 1000, "direct_p99_ms": pct(ld, 0.99) / 1000,
                       "proxy_cpu_us_per_call": cpu_proxy, "server_cpu_us_per_call": cpu_server,
                       "relay_cpu_us_per_call": cpu_relay},
            "detail": f"{clients} keep-alive connections for {seconds} s per round, {rounds} rounds; latency under "
                      f"load p50/p99: proxy {statistics.median(lp) / 1000:.2f}/{pct(lp, 0.99) / 1000:.2f} ms, "
                      f"direct {statistics.median(ld) / 1000:.2f}/{pct(ld, 0.99) / 1000:.2f} ms; CPU per call: proxy "
                      f"{cpu_proxy:.0f} µs, bare aiohttp relay {cpu_relay:.0f} µs, the server itself {cpu_server:.0f} µs; "
                      f"bare relay throughput {bare / d:.2f}x",
        })
    cpu_proxy, cpu_relay = statistics.median(cpu[("proxy", 100)]), statistics.median(cpu[("relay", 100)])
    rows.append({
        "scenario": "serve CPU per proxied tools/call (100 clients)", "unit": "µs",
        "proxy": f"{cpu_proxy:.0f} µs", "direct": f"{cpu_relay:.0f} µs (bare aiohttp relay)",
        "ratio": f"{cpu_proxy / cpu_relay:.2f}x", "goal": "<= the bare aiohttp relay's, same run",
        "met": cpu_proxy <= cpu_relay, "values": {"proxy_us": cpu_proxy, "relay_us": cpu_relay,
                                                 "rounds_proxy": cpu[("proxy", 100)], "rounds_relay": cpu[("relay", 100)]},
        "detail": "CPU of the proxy process (all threads) per answered call, 100 keep-alive clients"})
    direct = statistics.median(rate[("direct", 100)])
    for side in ("relay", *(s for s in sides if s not in base)):
        got = statistics.median(rate[(side, 100)])
        name = f"bare aiohttp relay, {loop_name()} (as the proxy above)" if side == "relay" else side
        rows.append({
            "scenario": f"HTTP throughput vs direct (100 clients): {name}", "unit": "calls/s",
            "proxy": f"{got:.0f} calls/s ({statistics.median(cpu[(side, 100)]):.0f} µs CPU per call)",
            "direct": f"{direct:.0f} calls/s", "ratio": f"{got / direct:.2f}x",
            "goal": "the most this design allows (reported)", "met": None,
            "values": {"per_second": got, "direct": direct, "ratio": got / direct,
                       "cpu_us_per_call": statistics.median(cpu[(side, 100)])}})
    return rows


def _variant_rows(skipped: dict[str, str]) -> list[dict]:
    return [{"scenario": f"HTTP throughput vs direct (100 clients): {name}", "skipped": why}
            for name, why in skipped.items()]
