"""Cold start: how much later a host gets its first answer when it starts a server through
`reminder-bridge stdio` instead of directly. Hosts start every configured server at launch and
send `initialize` at once, so this is the delay users notice first.

Each round, in alternating order: a bare interpreter (`python -c pass`, to the exit), the server
started directly, and the same server through the proxy (from spawn to the `initialize` answer,
the request written the moment the process exists, as a host does). The server is a small
hand-written Python one (`bench.peers mcp-flood`, stdlib only); the same is measured with a
rules file, and with an MCP SDK server when the SDK is installed, for information.
`--version` CPU is what the CLI costs before doing anything; `import bridge.rules` CPU (the rules
schema: pydantic) is what a rules file adds before the first answer: a route without one answers
`initialize` without pydantic (the reminder model is loaded by the first reminder).

  python -m bench.cold_start [--quick]
"""
from __future__ import annotations

import compileall
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from bench.procs import PY, bridge, cpu_seconds

INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "clientInfo": {"name": "bench", "version": "1"},
    "capabilities": {"experimental": {"reminders": {}}}}}).encode() + b"\n"
SMALL = [PY, "-m", "bench.peers", "mcp-flood"]
SDK = [PY, "-m", "bench.sdk_server"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "rules", "default.toml")


def first_answer(argv: list[str]) -> tuple[float, float]:
    """From spawn to the first line on stdout, `initialize` written at once (what a host waits),
    in ms; and the CPU ms the process itself (not its child) had used by then."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            bufsize=0)
    try:
        proc.stdin.write(INIT)
        line = proc.stdout.readline()
        elapsed = (time.perf_counter() - started) * 1e3
        cpu = cpu_seconds(proc.pid) * 1e3
        if b'"result"' not in line:
            raise RuntimeError(f"{' '.join(argv[-3:])}: no initialize result: {line[:200]!r}")
        return elapsed, cpu
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bare_start_ms() -> float:
    started = time.perf_counter()
    subprocess.run([PY, "-c", "pass"], check=True)
    return (time.perf_counter() - started) * 1e3


def cpu_ms(argv: list[str]) -> float:
    """User + system CPU of one run of ``argv`` to its exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3


#: the CPU `import bridge.rules` (pydantic and the rules schema) takes in a fresh interpreter, its start
#: and exit left out
RULES_IMPORT = "import time; t = time.process_time(); import bridge.rules; print(time.process_time() - t)"


def rules_import_ms() -> float:
    done = subprocess.run([PY, "-c", RULES_IMPORT], check=True, capture_output=True, text=True, cwd=ROOT)
    return float(done.stdout) * 1e3


def measure(rounds: int) -> dict[str, list[float]]:
    argv = {"direct": SMALL, "proxied": bridge("stdio", "--", *SMALL),
            "proxied, --rules": bridge("stdio", "--rules", RULES, "--", *SMALL)}
    if importlib.util.find_spec("mcp") is not None:
        argv |= {"SDK direct": SDK, "SDK proxied": bridge("stdio", "--", *SDK)}
    sides = ["bare", *argv]
    samples: dict[str, list[float]] = {side: [] for side in sides}
    for side in argv:
        samples[side + " CPU"] = []
    for r in range(rounds + 1):  # round 0 warms up: the page cache
        for side in (sides if r % 2 == 0 else sides[::-1]):  # alternate who goes first
            if side == "bare":
                took = bare_start_ms()
            else:
                took, cpu = first_answer(argv[side])
                if r:
                    samples[side + " CPU"].append(cpu)
            if r:
                samples[side].append(took)
    for _ in range(max(3, rounds // 2)):
        samples.setdefault("--version CPU", []).append(cpu_ms(bridge("--version")))
        samples.setdefault("bare CPU", []).append(cpu_ms([PY, "-c", "pass"]))
        samples.setdefault("rules schema CPU", []).append(rules_import_ms())
    return samples


def rows(samples: dict[str, list[float]]) -> list[dict]:
    med = {side: statistics.median(values) for side, values in samples.items()}
    added, bare = med["proxied"] - med["direct"], med["bare"]
    allowed = max(100.0, 3.5 * bare)
    out = [{
        "scenario": "stdio cold start: added delay to the first answer", "unit": "ms",
        "proxy": f"{med['proxied']:.0f} ms to initialize's answer", "direct": f"{med['direct']:.0f} ms",
        "ratio": f"{added:+.0f} ms (bare interpreter {bare:.0f} ms)",
        "goal": f"<= max(100 ms, 3.5x bare) = {allowed:.0f} ms", "met": added <= allowed,
        "values": {"added_ms": added, "allowed_ms": allowed, **{f"{side} ms": v for side, v in med.items()},
                   "rounds": samples},
        "detail": f"{len(samples['direct'])} alternating rounds, medians; server: python -m bench.peers mcp-flood "
                  f"(stdlib only); the same through `stdio --rules rules/default.toml`: "
                  f"{med['proxied, --rules'] - med['direct']:+.0f} ms; CPU to the first answer: proxy "
                  f"{med['proxied CPU']:.0f} ms, the server direct {med['direct CPU']:.0f} ms, a bare interpreter "
                  f"{med['bare CPU']:.0f} ms; `import bridge.rules` (the rules schema, pydantic: what --rules "
                  f"adds; without a rules file the first answer needs no pydantic) "
                  f"{med['rules schema CPU']:.0f} ms; bytecode compiled first, as an install has it"}]
    if "SDK direct" in med:
        sdk_added = med["SDK proxied"] - med["SDK direct"]
        out.append({
            "scenario": "stdio cold start: MCP SDK server (reported)", "unit": "ms",
            "proxy": f"{med['SDK proxied']:.0f} ms", "direct": f"{med['SDK direct']:.0f} ms",
            "ratio": f"{sdk_added:+.0f} ms", "goal": "(reported)", "met": None,
            "values": {"added_ms": sdk_added, "direct_ms": med["SDK direct"], "proxied_ms": med["SDK proxied"]},
            "detail": "python -m bench.sdk_server: a server written with the official SDK (mcp.server.MCPServer)"})
    out.append({
        "scenario": "reminder-bridge --version CPU", "unit": "ms", "proxy": f"{med['--version CPU']:.0f} ms CPU",
        "direct": f"{med['bare CPU']:.0f} ms CPU (python -c pass)", "ratio": f"{med['--version CPU'] - med['bare CPU']:+.0f} ms",
        "goal": "(reported)", "met": None, "values": {"cpu_ms": med["--version CPU"], "bare_cpu_ms": med["bare CPU"],
                                                      "rounds": samples["--version CPU"]}})
    return out


def run(quick: bool) -> list[dict]:
    # bytecode first, as `pip install` writes it: an editable install under PYTHONDONTWRITEBYTECODE
    # would otherwise compile every module from source at each start (~0.25 s here)
    for package in ("bridge", "bench"):
        compileall.compile_dir(os.path.join(ROOT, package), quiet=1)
    return rows(measure(5 if quick else 15))


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(f"{row['scenario']}: {row['proxy']} vs {row['direct']}: {row['ratio']}  goal {row['goal']}  "
              f"met {row['met']}" + (f"\n  {row['detail']}" if row.get("detail") else ""))
