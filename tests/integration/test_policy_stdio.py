"""Budgets through `reminder-bridge stdio` with a real child that floods: the host gets the bucket's
share of reminders and every other frame intact and in order, memory stays flat, and the admin
port's counters say exactly what happened."""
from __future__ import annotations

import json
import math
import re
import os
import socket
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.peers.flood_server import log_line
from tests.peers.jsonrpc_pipe import JsonRpcPipe

PROXY = [sys.executable, "-m", "bridge", "stdio"]
FLOOD = [sys.executable, "-m", "tests.peers.flood_server"]
STANDARD_HOST = {"protocolVersion": "2025-11-25", "capabilities": {"reminders": {}},
                 "clientInfo": {"name": "host", "version": "1"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, token: str | None = None) -> dict[str, float]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    text = urllib.request.urlopen(request, timeout=5).read().decode()
    samples = Samples()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            dict.__setitem__(samples, _canonical(name), float(value))
    return samples


def _canonical(key: str) -> str:
    """`name{b="2",a="1"}` -> `name{a="1",b="2"}`: label order carries no meaning."""
    name, brace, rest = key.partition("{")
    if not brace:
        return key
    return name + "{" + ",".join(sorted(re.findall(r'[a-zA-Z_]\w*="(?:[^"\\]|\\.)*"', rest))) + "}"


class Samples(dict):
    """Scraped samples, looked up with their labels in any order."""

    def __getitem__(self, key: str) -> float:
        return super().__getitem__(_canonical(key))

    def get(self, key: str, default=None):
        return super().get(_canonical(key), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(_canonical(key))


def wait_for_admin(port: int, proc) -> None:
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return
        except urllib.error.HTTPError:
            return  # up, and asking for a token
        except OSError:
            assert proc.poll() is None, "the proxy exited"
            time.sleep(0.05)
    raise AssertionError("admin port never came up")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def flood(pipe: JsonRpcPipe, msg_id: int, start: int, count: int) -> tuple[list[bytes], dict]:
    """One flooding tool call: (every raw frame before its result, the result)."""
    pipe.send({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
               "params": {"name": "flood", "arguments": {"start": start, "count": count}}})
    frames = []
    while True:
        raw = pipe.next_frame(timeout=60)
        if raw.startswith(b'{"jsonrpc":"2.0","id":%d,' % msg_id):
            return frames, json.loads(raw)
        frames.append(raw)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to read memory")
def test_a_flood_of_10000_reminders_gets_the_bucket_share_and_nothing_else_is_lost(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 60\nburst = 10\n')
    port = free_port()
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--admin", f"127.0.0.1:{port}", "--"] + FLOOD)
    try:
        init, _ = pipe.request("initialize", STANDARD_HOST)
        assert init["result"]["capabilities"]["reminders"] == {"emit": True, "propagate": ["session"],
                                                               "roleHints": ["system"]}
        wait_for_admin(port, pipe.proc)
        started = time.monotonic()
        first, result1 = flood(pipe, 2, 0, 5000)
        mid = rss_kib(pipe.proc.pid)
        second, result2 = flood(pipe, 3, 5000, 5000)
        elapsed = time.monotonic() - started
        after = rss_kib(pipe.proc.pid)
        metrics = scrape(port)
    finally:
        pipe.close()

    frames = first + second
    logs = [f for f in frames if b'"logger":"flood"' in f]
    reminders = [json.loads(f) for f in frames if b"notifications/reminder" in f]
    assert logs == [log_line(seq).encode() for seq in range(10_000)]  # byte-identical, in order
    assert len(frames) == len(logs) + len(reminders)  # nothing else reached the host
    assert result1["result"]["content"][0]["text"] == "flooded 0..4999"
    assert result2["result"]["content"][0]["text"] == "flooded 5000..9999"

    # The bucket's share: the burst at once, then one token a second (60/min) while the flood lasts.
    ids = [r["params"]["reminder"]["id"] for r in reminders]
    assert ids[:10] == [f"r{n}" for n in range(10)]
    assert 10 <= len(ids) <= 10 + math.floor(elapsed)
    labels = 'protocol="mcp",route="ci",action="{}",stage="translate"'
    assert metrics["reminder_bridge_reminders_total{%s}" % labels.format("rewritten")] == len(ids) + 1  # + handshake
    assert metrics["reminder_bridge_reminders_total{%s}" % labels.format("rate_limited")] == 10_000 - len(ids)
    assert metrics['reminder_bridge_budget_rejections_total{protocol="mcp",route="ci",scope="server",shadow="false"}'] \
        == 10_000 - len(ids)
    assert after - mid < 4 * 1024, f"proxy grew by {after - mid} KiB over the second 5,000 reminders"


def test_coalesce_releases_the_newest_per_key_when_tokens_return(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 600\nburst = 1\nover = "coalesce"\n')
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD)
    try:
        pipe.request("initialize", STANDARD_HOST)
        frames, _ = flood(pipe, 2, 0, 21)  # dedupe keys build:0 .. build:6, three reminders each
        immediate = [json.loads(f)["params"]["reminder"]["id"] for f in frames if b"notifications/reminder" in f]
        released = []
        deadline = time.monotonic() + 10
        while len(immediate) + len(released) < 8 and time.monotonic() < deadline:
            raw = pipe.next_frame(timeout=10)
            released.append(json.loads(raw)["params"]["reminder"]["id"])
    finally:
        pipe.close()
    assert immediate == ["r0"]  # the burst
    # over budget: only the newest per key is held (r14..r20 for keys 0..6); r0's key came back too
    assert sorted(released, key=lambda r: int(r[1:])) == [f"r{n}" for n in range(14, 21)]


def test_shadow_changes_nothing_on_the_wire(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 60\nburst = 1\nshadow = true\n')
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD)
    try:
        pipe.request("initialize", {**STANDARD_HOST, "capabilities": {"_meta": {"harn": {"reminders": {}}}}})
        frames, _ = flood(pipe, 2, 0, 50)
    finally:
        pipe.close()
    from tests.peers.flood_server import reminder

    expected = [line.encode() for seq in range(50) for line in (reminder(seq), log_line(seq))]
    assert frames == expected  # a legacy host: every frame byte-identical, none limited
