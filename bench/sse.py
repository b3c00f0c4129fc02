"""SSE splitting cost, in process: what `serve` pays to cut an upstream's event stream into events.

Small events (an MCP progress notification, 80 bytes) arrive 1, 64 or 1,024 to a read; one huge
event (16 MiB, 4 MiB in a quick run) arrives in 64 KiB reads. The splitter runs through its
async `events()` API, exactly as the HTTP transport drives it.  The baseline is the floor for the
same bytes: `bytes.split(b"\\n\\n")` on each read.

`python -m bench.sse --module PATH` measures another implementation of `events()` (e.g. an older
`bridge/transports/sse.py` saved aside) with the same inputs, for before/after tables.
"""
from __future__ import annotations

import asyncio
import importlib.util
import statistics
import sys
import time
from typing import Any

SMALL = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'


def _events_function(module_path: str | None) -> Any:
    if module_path is None:
        from bridge.transports.sse import events

        return events
    spec = importlib.util.spec_from_file_location("other_sse", module_path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["other_sse"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.events


def _cost(events: Any, chunks: list[bytes]) -> tuple[float, int]:
    async def source():
        for chunk in chunks:
            yield chunk

    async def drain() -> int:
        return sum([1 async for _ in events(source())])

    started = time.process_time()
    count = asyncio.run(drain())
    return time.process_time() - started, count


def _floor(chunks: list[bytes]) -> float:
    started = time.process_time()
    for chunk in chunks:
        chunk.split(b"\n\n")
    return time.process_time() - started


def measure(quick: bool, module_path: str | None = None) -> list[dict]:
    events = _events_function(module_path)
    rounds = 3 if quick else 7
    rows = []
    total = 20_480 if quick else 102_400
    for per_chunk in (1, 64, 1024):
        chunks = [SMALL * per_chunk] * (total // per_chunk)
        times = []
        for _ in range(rounds):
            spent, count = _cost(events, chunks)
            assert count == total, count
            times.append(spent / total)
        floor = statistics.median(_floor(chunks) / total for _ in range(rounds))
        per_event = statistics.median(times)
        rows.append({"scenario": f"SSE split, {per_chunk} events per read", "proxy": f"{per_event * 1e6:.2f} µs/event",
                     "direct": f"{floor * 1e6:.2f} µs/event (bytes.split)", "ratio": f"{per_event / floor:.1f}×",
                     "goal": "linear (reported)", "met": None, "value_us": per_event * 1e6})
    size = (4 if quick else 16) << 20
    big = b"data: " + b"x" * size + b"\n\n"
    chunks = [big[i:i + 65536] for i in range(0, len(big), 65536)]
    spent = statistics.median(_cost(events, chunks)[0] for _ in range(rounds))
    floor = statistics.median(_floor(chunks) for _ in range(rounds))
    rows.append({"scenario": f"SSE split, one {size >> 20} MiB event in 64 KiB reads", "proxy": f"{spent * 1e3:.1f} ms",
                 "direct": f"{floor * 1e3:.1f} ms (bytes.split)", "ratio": f"{spent / max(floor, 1e-9):.1f}×",
                 "goal": "linear (reported)", "met": None, "value_ms": spent * 1e3})
    return rows


def run(quick: bool) -> list[dict]:
    return measure(quick)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.sse")
    parser.add_argument("--module", help="path of another sse.py whose events() to measure")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for row in measure(args.quick, args.module):
        print(f"{row['scenario']}: {row['proxy']} (floor {row['direct']}, {row['ratio']})")
    sys.exit(0)
