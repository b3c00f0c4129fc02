"""`python -m bench [--quick] [--json FILE]`: run the scenarios, print a table of medians and ratios."""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from bench import stdio


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="about a minute: smaller inputs, fewer rounds")
    parser.add_argument("--json", default="bench/results/latest.json", help="where to write the results")
    args = parser.parse_args()
    size, rounds, trips = (20, 3, 1000) if args.quick else (100, 5, 3000)
    results = []
    for run in (lambda: stdio.throughput(size, rounds), lambda: stdio.latency(trips, rounds)):
        started = time.perf_counter()
        result = run()
        result["seconds"] = round(time.perf_counter() - started, 1)
        results.append(result)
        print(f"  done: {result['scenario']} ({result['seconds']} s)", file=sys.stderr)
    header = ("scenario", "proxy", "direct", "ratio / added", "goal", "met")
    rows = [(r["scenario"], f"{r['proxy']} {r['unit']}", f"{r['direct']} {r['unit']}", str(r["ratio"]), r["goal"],
             "yes" if r["met"] else "NO") for r in results]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print(f"machine: {machine()}")
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)))
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as out:
        json.dump({"machine": machine(), "quick": args.quick, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "results": results}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
