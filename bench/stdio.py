"""stdio scenarios: passthrough throughput vs a bare asyncio relay around the same child (`cat`), and
added round-trip latency vs the same child spawned directly (bench/echo_child.py answers each request)."""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

from bench.procs import bridge, pct, relay

PY = sys.executable
ECHO = [PY, "-m", "bench.echo_child"]


def traffic(megabytes: float, seed: int = 1) -> bytes:
    """Ordinary MCP traffic (no reminders): requests, results and logs of 100 B to 16 KiB."""
    rng = random.Random(seed)
    lines = []
    size = 0
    i = 0
    while size < megabytes * 1024 * 1024:
        i += 1
        kind = rng.random()
        if kind < 0.4:
            msg = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "search", "arguments": {"q": "x" * rng.randint(10, 400)}}}
        elif kind < 0.8:
            msg = {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text",
                                                                        "text": "é" * rng.randint(50, 8000)}]}}
        else:
            msg = {"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "info", "logger": "app", "data": "log line " * rng.randint(1, 50)}}
        line = json.dumps(msg, ensure_ascii=False).encode() + b"\n"
        lines.append(line)
        size += len(line)
    return b"".join(lines)


def _throughput_once(wrapper: list[str], data: bytes) -> float:
    """MB/s echoed through ``wrapper`` around `cat`, timed after a warm-up line (no start-up cost)."""
    proc = subprocess.Popen(wrapper + ["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    warm = b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n'
    proc.stdin.write(warm)
    proc.stdin.flush()
    assert proc.stdout.readline() == warm
    start = time.perf_counter()

    def feed() -> None:
        proc.stdin.write(data)
        proc.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    received = 0
    while chunk := proc.stdout.read1(1 << 20):
        received += len(chunk)
    elapsed = time.perf_counter() - start
    proc.wait()
    if received != len(data):
        raise RuntimeError(f"{wrapper[2]} lost data: {received} of {len(data)} bytes")
    return len(data) / elapsed / 1e6


def throughput(megabytes: float, rounds: int) -> dict:
    data = traffic(megabytes)
    proxy, relayed = [], []
    for _ in range(rounds):  # alternate, so drift on the machine hits both alike
        relayed.append(_throughput_once(relay("--"), data))
        proxy.append(_throughput_once(bridge("stdio", "--"), data))
    p, r = statistics.median(proxy), statistics.median(relayed)
    return {"scenario": "stdio passthrough throughput", "unit": "MB/s", "proxy": f"{p:.1f} MB/s",
            "direct": f"{r:.1f} MB/s (bare relay)", "ratio": f"{p / r:.2f}x", "goal": ">= 0.8x bare asyncio relay",
            "met": p / r >= 0.8, "values": {"proxy": p, "direct": r, "ratio": p / r, "rounds_proxy": proxy,
                                            "rounds_direct": relayed},
            "detail": f"{len(data) / 1e6:.0f} MB of ordinary MCP traffic through `cat`, median of {rounds}"}


#: the request each round trip sends (``%d``: its id)
CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}\n'


class Peer:
    """One child (wrapped or not) answering requests on pipes, one round trip at a time: ``call``
    (with ``%d`` for the id) is what each trip sends."""

    def __init__(self, argv: list[str], call: bytes = CALL):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.fd_in, self.fd_out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.buffered = b""
        self.call = call
        self.answer = b""  # the last trip's answer

    def trip(self, i: int) -> float:
        line = self.call % i
        start = time.perf_counter()
        os.write(self.fd_in, line)
        while b"\n" not in self.buffered:
            self.buffered += os.read(self.fd_out, 65536)
        elapsed = time.perf_counter() - start
        self.answer, _, self.buffered = self.buffered.partition(b"\n")
        return elapsed * 1e6

    def send(self, line: bytes) -> None:
        """A line that gets no answer (a notification)."""
        os.write(self.fd_in, line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _round_trips(argv: list[str], count: int) -> list[float]:
    peer = Peer(argv)
    samples = [peer.trip(i) for i in range(count + 200)][200:]  # warm-up excluded
    peer.close()
    return samples


def latency(count: int, rounds: int) -> dict:
    """The echo child spawned directly and behind the proxy, both alive at once; round trips
    alternate between them one by one, so any noise on the machine hits both sides alike."""
    proxy: list[float] = []
    direct: list[float] = []
    for _ in range(rounds):
        bare, wrapped = Peer(ECHO), Peer(bridge("stdio", "--") + ECHO)
        for i in range(count + 200):
            first, second = (bare, wrapped) if i % 2 else (wrapped, bare)
            a, b = first.trip(i), second.trip(i)
            if i >= 200:  # warm-up excluded
                direct.append(a if first is bare else b)
                proxy.append(b if first is bare else a)
        bare.close()
        wrapped.close()

    added50 = statistics.median(proxy) - statistics.median(direct)
    added99 = pct(proxy, 0.99) - pct(direct, 0.99)
    return {"scenario": "stdio added round-trip latency", "unit": "µs",
            "proxy": f"p50 {statistics.median(proxy):.0f} / p99 {pct(proxy, 0.99):.0f}",
            "direct": f"p50 {statistics.median(direct):.0f} / p99 {pct(direct, 0.99):.0f}",
            "ratio": f"{added50:+.0f} p50 / {added99:+.0f} p99", "goal": "<= +150 µs p50, <= +500 µs p99",
            "met": added50 <= 150 and added99 <= 500,
            "values": {"proxy_p50_us": statistics.median(proxy), "proxy_p99_us": pct(proxy, 0.99),
                       "direct_p50_us": statistics.median(direct), "direct_p99_us": pct(direct, 0.99),
                       "added_p50_us": added50, "added_p99_us": added99},
            "detail": f"{len(proxy)} tools/call round trips per side, echo child answering each; direct and proxied "
                      f"trips interleaved one by one, {rounds} rounds"}


def run(quick: bool) -> list[dict]:
    size, rounds, trips = (20, 3, 1000) if quick else (100, 5, 3000)
    return [throughput(size, rounds), latency(trips, rounds)]
