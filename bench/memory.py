"""Memory: the stdio proxy's resident size idle, and holding 10,000 ACP sessions × 5 reminders.

The agent (bench/peers.py `acp-none`) has no reminder support, so the proxy holds every injected
reminder itself (spec §4, agent `none` fallback) until the session's next prompt.  The client
declares standard reminders and injects 5 reminders with distinct dedupe keys into each session.
Resident size is read from /proc; the bare asyncio relay around the same agent is the baseline
for what a Python process relaying stdio costs at rest.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time

from bench.procs import PY, bridge, has_proc, relay, rss_kib

AGENT = [PY, "-m", "bench.peers", "acp-none"]
GOAL_BYTES = 2048


class Host:
    """This process as the ACP client: writes blocks, a thread reads and counts replies by id."""

    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.answered: set = set()
        self.errors: list[dict] = []
        self.updates: list[dict] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._cond:
                if "id" in msg and "method" not in msg:
                    self.answered.add(msg["id"])
                    if "error" in msg:
                        self.errors.append(msg)
                elif msg.get("method") == "session/update":
                    self.updates.append(msg)
                self._cond.notify_all()

    def send(self, messages: list[dict]) -> None:
        self.proc.stdin.write(b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def wait_for(self, ids, timeout: float = 300) -> None:
        ids = set(ids)
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ids <= self.answered:
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    raise RuntimeError(f"no answer for {len(ids - self.answered)} requests")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def _settle(pid: int) -> int:
    """Resident size once it stops moving (the allocator returns and reuses memory in bursts)."""
    last = rss_kib(pid)
    for _ in range(10):
        time.sleep(0.2)
        now = rss_kib(pid)
        if abs(now - last) < 64:
            return now
        last = now
    return last


def _idle(argv: list[str]) -> int:
    host = Host(argv)
    host.send([{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {"reminders": {}}}},
               {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}])
    host.wait_for({0, 1})
    rss = _settle(host.proc.pid)
    host.close()
    return rss


def run(quick: bool) -> list[dict]:
    if not has_proc():
        return [{"scenario": "memory", "skipped": "needs Linux /proc to read resident size"}]
    sessions, per_session = 10_000, 5
    relay_idle = _idle(relay("--") + AGENT)
    host = Host(bridge("stdio", "--protocol", "acp", "--") + AGENT)
    host.send([{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {"reminders": {}}}}])
    host.wait_for({0})
    ids = list(range(1, sessions + 1))
    for start in range(0, sessions, 1000):
        host.send([{"jsonrpc": "2.0", "id": i, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
                   for i in ids[start:start + 1000]])
    host.wait_for(ids)
    # one reminder in and out first: the proxy loads its reminder model with the first reminder it
    # decodes (issue 23), which is the route's cost, not the held reminders'
    host.send([{"jsonrpc": "2.0", "id": "warm", "method": "session/inject_reminder",
                "params": {"sessionId": f"s{sessions}", "id": "warm", "body": "warm-up"}},
               {"jsonrpc": "2.0", "id": "warmed", "method": "session/prompt",
                "params": {"sessionId": f"s{sessions}", "prompt": [{"type": "text", "text": "go"}]}}])
    host.wait_for({"warm", "warmed"})
    idle = _settle(host.proc.pid)  # sessions exist at the agent; the proxy holds nothing for them yet
    started = time.perf_counter()
    next_id = sessions + 1
    for base in range(0, sessions, 500):
        batch = []
        for s in range(base + 1, min(base + 501, sessions + 1)):
            for k in range(per_session):
                batch.append({"jsonrpc": "2.0", "id": next_id, "method": "session/inject_reminder", "params": {
                    "sessionId": f"s{s}", "id": f"r-{s}-{k}", "body": f"Reminder {k} for session {s}: the build "
                    f"on main is red; check CI before pushing.", "tags": ["ci"], "dedupeKey": f"ci:{k}",
                    "ttlTurns": 3, "mode": "finish_step"}})
                next_id += 1
        host.send(batch)
    host.wait_for(range(sessions + 1, next_id))
    inject_seconds = time.perf_counter() - started
    loaded = _settle(host.proc.pid)
    held = (next_id - sessions - 1) - len(host.errors)
    # prove they are held: the next prompt of one session shows its 5 reminders to the model
    before = len(host.updates)
    host.send([{"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "go"}]}}])
    host.wait_for({"p"})
    shown = sum(1 for u in host.updates[before:] if u.get("params", {}).get("sessionId") == "s1")
    host.close()
    per = (loaded - idle) * 1024 / max(held, 1)
    return [{
        "scenario": "memory: stdio proxy idle", "unit": "MiB", "proxy": f"{idle / 1024:.1f} MiB",
        "direct": f"{relay_idle / 1024:.1f} MiB (bare asyncio relay)", "ratio": f"{idle / relay_idle:.2f}x",
        "goal": "- (reported)", "met": None,
        "values": {"proxy_kib": idle, "relay_kib": relay_idle},
        "detail": f"resident size after initialize and {sessions} session/new, nothing held; the relay's after "
                  f"initialize",
    }, {
        "scenario": "memory per pending reminder (10,000 ACP sessions x 5)", "unit": "B",
        "proxy": f"{per:.0f} B/reminder", "direct": f"+{(loaded - idle) / 1024:.1f} MiB for {held} held",
        "ratio": f"{loaded / 1024:.1f} MiB total", "goal": f"<= {GOAL_BYTES} B per pending reminder",
        "met": per <= GOAL_BYTES and held == sessions * per_session and shown == per_session,
        "values": {"bytes_per_reminder": per, "idle_kib": idle, "loaded_kib": loaded, "held": held,
                   "errors": len(host.errors), "shown_on_prompt": shown, "inject_seconds": inject_seconds},
        "detail": f"{sessions} sessions x {per_session} injects (agent without reminder support: the proxy holds "
                  f"them); {held / inject_seconds:,.0f} injects/s answered; a prompt then showed {shown}",
    }]
