"""Hot reload through `reminder-bridge stdio` with a real child: a route flips from `observe` to
`translate` under live traffic without dropping the connection, and a broken file is refused with
the same problems `reminder-bridge check` prints while the old rules stay."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from tests.peers.flood_server import log_line, reminder
from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.integration.test_policy_stdio import FLOOD, PROXY, STANDARD_HOST, flood

OBSERVE = '[routes.ci]\nprotocol = "mcp"\nstage = "observe"\n'
TRANSLATE = '[routes.ci]\nprotocol = "mcp"\nstage = "translate"\n'
BROKEN = '[routes.ci]\nprotocol = "mcp"\nstage = "translat"\n[routes.ci.budget]\nburst = 10.0\n'


def kinds(frames: list[bytes]) -> list[str]:
    out = []
    for raw in frames:
        if b"notifications/reminder" in raw:
            out.append("standard")
        elif b"harn.reminder" in raw:
            out.append("legacy")
    return out


class LoggedPipe(JsonRpcPipe):
    """A JsonRpcPipe whose stderr reader wakes whoever waits for a log line (no polling)."""

    def __init__(self, argv: list[str]):
        self.logged = threading.Condition()
        self.stderr_closed = False
        super().__init__(argv)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.logged:
                self.stderr += line
                self.logged.notify_all()
        with self.logged:
            self.stderr_closed = True
            self.logged.notify_all()

    def events(self, event: str) -> list[dict]:
        with self.logged:
            text = bytes(self.stderr).decode()
        return [json.loads(line) for line in text.splitlines()
                if line.startswith("{") and f'"event": "{event}"' in line]


def log_events(pipe: LoggedPipe, event: str, timeout: float = 10.0, **fields) -> list[dict]:
    """Wait until an `event` line (with ``fields``) is logged; returns every such line."""
    def found() -> list[dict]:
        return [e for e in pipe.events(event) if all(e.get(k) == v for k, v in fields.items())]

    with pipe.logged:
        pipe.logged.wait_for(lambda: found() or pipe.stderr_closed, timeout)
    lines = found()
    if lines:
        return lines
    raise AssertionError(f"no {event} log line {fields or ''}; stderr: {bytes(pipe.stderr).decode()[-2000:]}")


def write(path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # how editors and config managers write: a new inode


def test_observe_flips_to_translate_under_live_traffic_and_a_broken_file_keeps_the_old_rules(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(OBSERVE)
    pipe = LoggedPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD)
    try:
        init, _ = pipe.request("initialize", STANDARD_HOST)
        assert "reminders" not in init["result"]["capabilities"]  # observe: the handshake is untouched too
        frames, _ = flood(pipe, 2, 0, 3)
        assert frames == [line.encode() for seq in range(3) for line in (reminder(seq), log_line(seq))]

        write(rules, TRANSLATE)  # noticed by the file watcher while calls keep coming
        seen, seq, msg_id = [], 3, 3
        deadline = time.monotonic() + 10
        reloaded: list[dict] = []
        while not reloaded:  # live traffic until the proxy says it applied the new file
            assert time.monotonic() < deadline, f"no rules_reloaded; stderr: {bytes(pipe.stderr).decode()[-2000:]}"
            frames, result = flood(pipe, msg_id, seq, 2)
            assert result["result"]["content"][0]["text"] == f"flooded {seq}..{seq + 1}"
            assert [f for f in frames if b'"logger":"flood"' in f] == [log_line(n).encode() for n in (seq, seq + 1)]
            seen += kinds(frames)
            seq, msg_id = seq + 2, msg_id + 1
            reloaded = [e for e in pipe.events("rules_reloaded") if e.get("stage") == "translate"]
        frames, _ = flood(pipe, msg_id, seq, 2)  # sent after the reload was applied: translated
        seen += kinds(frames)
        assert kinds(frames) == ["standard", "standard"]
        flipped = seen.index("standard")
        assert set(seen[:flipped]) <= {"legacy"} and set(seen[flipped:]) == {"standard"}  # one clean switch

        write(rules, BROKEN)
        refused = log_events(pipe, "reload_refused")[-1]
        check = subprocess.run([sys.executable, "-m", "bridge", "check", str(rules)], capture_output=True, text=True)
        assert refused["problems"] == check.stdout.splitlines()  # the very lines `check` prints
        assert any("routes.ci.stage: must be one of observe, dual, translate, enforce" in p for p in refused["problems"])
        frames, _ = flood(pipe, 100, 1000, 2)
        assert kinds(frames) == ["standard", "standard"]  # the old rules (translate) stay

        rules.write_text(OBSERVE)  # fixed again, and a SIGHUP asks for it at once
        pipe.proc.send_signal(signal.SIGHUP)
        log_events(pipe, "rules_reloaded", stage="observe")  # applied (by the signal, or the watcher if faster)
        frames, _ = flood(pipe, 101, 2000, 2)
        assert kinds(frames) == ["legacy", "legacy"]
        assert pipe.proc.poll() is None  # one process, one connection, throughout
    finally:
        assert pipe.close() == 0


def test_budget_tokens_survive_a_reload_that_keeps_the_key(tmp_path):
    rules = tmp_path / "rules.toml"
    budget = '[routes.ci]\nprotocol = "mcp"\nstage = "{}"\n[routes.ci.budget]\nrate = 1\nburst = 3\n'
    rules.write_text(budget.format("translate"))
    pipe = LoggedPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD)
    try:
        pipe.request("initialize", STANDARD_HOST)
        frames, _ = flood(pipe, 2, 0, 5)
        assert kinds(frames) == ["standard"] * 3  # the burst
        write(rules, budget.format("dual"))
        log_events(pipe, "rules_reloaded")
        frames, _ = flood(pipe, 3, 5, 5)
        assert kinds(frames) == []  # same key (the server): still no tokens, the reload forgave nothing
    finally:
        pipe.close()
