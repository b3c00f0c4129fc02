"""`serve --workers N` as an operator runs it: real processes on one real port, with a real
redis-server as the shared state; signals reach every worker; a worker that cannot start stops the
rest and sets the exit code; without shared state it refuses to start and says why."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid

import pytest

from tests.fault.test_serve import faulty, sample
from tests.integration.test_fleet import mcp_route, open_session, remind
from tests.peers.processes import Running, free_port, peer, proxy, wait_until

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
    "capabilities": {"experimental": {"reminders": {}}}}})
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def server():
    running = peer("tests.peers.mcp_legacy_http", "--event-delay", "0.0")
    yield running
    running.stop()


@pytest.fixture
def workers(server, redis_url):
    running = proxy("--workers", "2", "--state", redis_url, "--protocol", "mcp",
                    "--upstream", f"http://127.0.0.1:{server.port}")
    yield running
    running.stop()


def pids_of(running: Running) -> list[int]:
    listening = next(json.loads(line) for line in running.stderr if '"listening"' in line)
    return listening["workers"]


def owner(server_port: int, client_port: int, pids: list[int]) -> int:
    """The worker holding the server side of the loopback connection from ``client_port``."""
    wanted = (f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}")
    with open("/proc/net/tcp") as table:
        inode = next(fields[9] for fields in (line.split() for line in table) if tuple(fields[1:3]) == wanted)
    return next(pid for pid in pids if f"socket:[{inode}]" in
                {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="finds each connection's worker in /proc")
def test_two_workers_answer_on_one_port_and_sigterm_stops_both(workers):
    pids = pids_of(workers)
    assert len(set(pids)) == 2
    connections = []
    for _ in range(24):  # the kernel spreads connections by hash: 24 miss a worker with odds 2 in 2**24
        conn = http.client.HTTPConnection("127.0.0.1", workers.port, timeout=10)
        conn.request("POST", "/mcp", INIT, HEADERS)
        answer = conn.getresponse()
        assert answer.status == 200 and "result" in json.loads(answer.read())
        connections.append(conn)
    owners = {owner(workers.port, conn.sock.getsockname()[1], pids) for conn in connections}
    for conn in connections:
        conn.close()
    assert owners == set(pids)
    workers.proc.send_signal(signal.SIGTERM)
    assert workers.proc.wait(30) == 0
    assert not any(alive(pid) for pid in pids)


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="finds each connection's worker in /proc")
def test_the_admin_port_of_two_workers_counts_what_the_first_worker_did(server, redis_url):
    """docs/deploy.md: the admin port is the first worker's, and so are the counters it shows (the
    budgets are the fleet's, in Redis). A standard host's `initialize` to a legacy server is one
    capability rewrite: `/metrics` counts exactly those the first worker handled, in an exposition
    prometheus_client parses."""
    from prometheus_client.parser import text_string_to_metric_families

    admin = free_port()
    running = proxy("--workers", "2", "--state", redis_url, "--admin", f"127.0.0.1:{admin}", "--protocol", "mcp",
                    "--upstream", f"http://127.0.0.1:{server.port}")
    try:
        pids = pids_of(running)
        owners = []
        for _ in range(24):
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
            conn.request("POST", "/mcp", INIT, HEADERS)
            answer = conn.getresponse()
            assert answer.status == 200 and "result" in json.loads(answer.read())
            owners.append(owner(running.port, conn.sock.getsockname()[1], pids))
            conn.close()
        text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10).read().decode()
        families = [f.name for f in text_string_to_metric_families(text)]
        assert len(families) == len(set(families))
        assert sample(text, "reminder_bridge_reminders_total", action="rewritten") == owners.count(pids[0])
    finally:
        running.stop()


def test_sighup_reaches_every_worker(workers):
    workers.proc.send_signal(signal.SIGHUP)  # no rules file: each worker says it has nothing to reload
    wait_until(lambda: sum('"reload_skipped"' in line for line in workers.stderr) == 2)
    assert workers.proc.poll() is None


def test_a_worker_that_cannot_start_stops_the_others_and_gives_its_exit_code(server, redis_url):
    """The admin port is taken: worker 0 cannot start (exit 2), which is a configuration error, not
    a crash to restart (a killed worker is restarted: tests/fault/test_process_lifecycle.py)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = subprocess.run([sys.executable, "-m", "bridge", "serve", "--workers", "2", "--state", redis_url,
                                 "--listen", "127.0.0.1:0", "--admin", f"127.0.0.1:{taken.getsockname()[1]}",
                                 "--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.port}"],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    exits = [json.loads(line) for line in result.stderr.splitlines() if '"worker_exited"' in line]
    failed = next(e for e in exits if e["index"] == 0)
    assert failed["code"] == 2 and failed["restarted"] is False and "could not start" in failed["why"]
    assert not any(e["restarted"] for e in exits)


def test_more_than_one_worker_without_shared_state_refuses_and_says_how(server):
    result = subprocess.run([sys.executable, "-m", "bridge", "serve", "--workers", "2", "--listen", "127.0.0.1:0",
                             "--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.port}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--workers 2 needs shared state" in result.stderr
    assert "budget" in result.stderr and "session" in result.stderr  # why
    assert '[state] url = "redis://' in result.stderr and "--state redis://" in result.stderr  # how


async def test_workers_share_one_budget_and_one_session_table_through_redis(tmp_path, redis_url):
    """burst 5, one token a minute: 12 calls over fresh connections (the kernel spreads them over
    both workers) deliver the fleet's 5 (6 if a token refilled), not 5 per worker; and the session
    opened on whichever worker took the handshake gets standard reminders on the other."""
    upstream = faulty()
    rules = tmp_path / "rules.toml"
    rules.write_text(mcp_route(upstream, '[routes.mcp.budget]\nrate = 1\nburst = 5\nkey = "server"\n')
                     + f'[state]\nurl = "{redis_url}"\nkey_prefix = "rb-workers-{uuid.uuid4().hex[:8]}:"\n')
    running = proxy("--workers", "2", "--rules", str(rules))
    try:
        session = await open_session(running.port)
        delivered = 0
        for i in range(12):  # each post is a new connection
            frames = await remind(running.port, session, i + 1, 1)
            assert frames[-1]["result"]["content"][0]["text"] == "reminded"
            assert not [f for f in frames if f.get("method") == "notifications/message"]
            delivered += sum(f.get("method") == "notifications/reminder" for f in frames)
        assert 5 <= delivered <= 6, delivered
    finally:
        running.stop()
        upstream.stop()
