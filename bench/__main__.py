"""`python -m bench [--quick] [--only NAME ...] [--loop asyncio|uvloop] [--peers [--peers-offline]] [--json FILE]`:
run the scenarios, print a table of medians and ratios beside the goals, and write every number to a
JSON file.

Each scenario runs the proxy as a real process against a real peer on loopback and measures a
direct baseline in the same run, in alternating rounds (the rewrite-cost scenario runs the
pipeline in process, against plain JSON decoding and encoding of the same frames).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import traceback

SCENARIOS = ("stdio", "cold_start", "reminders", "mcp_http", "a2a", "rewrite", "sse", "memory", "flood", "state",
             "eras")
PEERS = "peers"  # `--peers`, or `--only peers`: bench/alternatives.py


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as info:
            kib = int(next(line.split()[1] for line in info if line.startswith("MemTotal")))
            memory = f", {kib / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{cpu}, {os.cpu_count()} cores{memory}, {platform.python_implementation()} "
            f"{platform.python_version()}, {platform.system()} {platform.release()}")


def proxy_version() -> str:
    """What `reminder-bridge --version` says (event loop, extras found), on one line."""
    try:
        said = subprocess.run([sys.executable, "-m", "bridge", "--version"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"? ({exc})"
    if said.returncode != 0:
        return "? (this reminder-bridge has no --version)"
    return "; ".join(said.stdout.strip().splitlines())


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def run_scenario(name: str, args: argparse.Namespace) -> list[dict]:
    if name == PEERS:
        from bench import alternatives

        return alternatives.run(args.quick, offline=args.peers_offline)
    return importlib.import_module(f"bench.{name}").run(args.quick)


def table(results: list[dict]) -> list[str]:
    header = ("scenario", "proxy", "direct", "ratio / added", "goal", "met")
    rows = []
    for r in results:
        if "skipped" in r:
            rows.append((r["scenario"], "skipped: " + r["skipped"], "", "", "", "-"))
            continue
        met = "-" if r.get("met") is None else "yes" if r["met"] else "NO"
        rows.append((r["scenario"], str(r["proxy"]), str(r["direct"]), str(r["ratio"]), r["goal"], met))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
            for row in [header, tuple("-" * w for w in widths), *rows]]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="about a minute: smaller inputs, fewer rounds")
    parser.add_argument("--only", nargs="+", choices=(*SCENARIOS, PEERS), metavar="NAME",
                        help=f"run only these scenarios ({', '.join(SCENARIOS)}; {PEERS}: the peers table alone)")
    parser.add_argument("--json", default="bench/results/latest.json", help="where to write the results")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"),
                        help="run the proxies and relays on this loop (default: as the proxy chooses, uvloop when "
                             "installed)")
    parser.add_argument("--peers", action="store_true",
                        help="also run other MCP proxies (FastMCP, mcp-proxy, supergateway, ContextForge translate, "
                             "nginx) in every position each takes, beside reminder-bridge; missing ones are installed "
                             "under the cache directory (bench/peer_install.py)")
    parser.add_argument("--peers-offline", action="store_true",
                        help="with --peers: install nothing, use the peers already cached (rows say what is missing)")
    args = parser.parse_args(argv)
    if args.peers_offline and not (args.peers or PEERS in (args.only or ())):
        parser.error("--peers-offline goes with --peers (or --only peers)")
    if args.loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        parser.error("--loop uvloop needs uvloop: pip install 'reminder-bridge[fast]'")
    return args


def scenarios(args: argparse.Namespace) -> list[str]:
    """What runs, in order: the scenarios asked for (all by default), then the peers table."""
    names = [name for name in args.only or SCENARIOS if name != PEERS]
    return [*names, *([PEERS] if args.peers or PEERS in (args.only or ()) else [])]


def main() -> int:
    args = parse()
    if args.loop:
        os.environ["REMINDER_BRIDGE_LOOP"] = args.loop
    results: list[dict] = []
    timings: dict[str, float] = {}
    load_before = load()
    started_all = time.perf_counter()
    for name in scenarios(args):
        started = time.perf_counter()
        print(f"  running: {name} ...", file=sys.stderr, flush=True)
        try:
            rows = run_scenario(name, args)
        except Exception as exc:  # one broken scenario must not hide the others' numbers
            traceback.print_exc()
            rows = [{"scenario": name, "skipped": f"failed: {type(exc).__name__}: {exc}"[:200]}]
        timings[name] = round(time.perf_counter() - started, 1)
        for row in rows:
            row["seconds"] = timings[name]
        results += rows
        print(f"  done: {name} ({timings[name]} s)", file=sys.stderr, flush=True)
    info = {"machine": machine(), "proxy": proxy_version(), "load_before": load_before, "load_after": load(), "commit": commit(),
            "quick": args.quick, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.perf_counter() - started_all, 1)}
    print(f"machine: {info['machine']}")
    print(f"proxy: {info['proxy']}")
    print(f"load average before/after: {info['load_before']} / {info['load_after']}; commit {info['commit']}; "
          f"{'quick' if args.quick else 'full'} run, {info['seconds']} s")
    own = [row for row in results if not row["scenario"].startswith("peers ")]
    for line in table(own) if own else []:
        print(line)
    if len(own) < len(results):
        from bench.alternatives import table as peers_table

        print("\npeers (python -m bench --peers): same run, same servers")
        for line in peers_table([row for row in results if row["scenario"].startswith("peers ")]):
            print(line)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as out:
        json.dump({**info, "timings": timings, "results": results}, out, indent=2, ensure_ascii=False)
    print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
