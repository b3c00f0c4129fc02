"""Fault tolerance of `reminder-bridge stdio`, with real processes: a child that dies mid-request,
a side that stops reading, SIGTERM during traffic, and hostile bytes from either side."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.fault

PROXY = [sys.executable, "-m", "bridge", "stdio"]
CHILD = [sys.executable, "-m", "tests.peers.crashing_child"]
HAS_PROC = os.path.exists("/proc/self/status")


def request(msg_id, method: str, **params) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode() + b"\n"


def status_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_for_rss(pid: int) -> int:
    """The proxy's resident size once it has started (imports done, child running)."""
    time.sleep(0.8)
    return status_kib(pid)


# -- the child dies mid-request -------------------------------------------------------------------
@pytest.mark.parametrize("how, code, exit_code, named", [
    ({"method": "die", "code": 3}, 3, 3, "exited with code 3"),
    ({"method": "kill", "signal": 9}, None, 128 + 9, "was killed by SIGKILL"),
])
def test_child_crash_answers_every_request_in_flight_then_mirrors_the_exit(how, code, exit_code, named):
    proc = subprocess.Popen(PROXY + ["--"] + CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    method = how.pop("method")
    proc.stdin.write(request(1, "ping") + request("slow-1", "hang") + request(2, "ping")
                     + request(3.5, "hang") + request("x", method, **how))
    proc.stdin.flush()  # stdin stays open: the host is still there when the child dies
    out = proc.stdout.read()
    assert proc.wait(15) == exit_code
    replies = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in replies] == [1, 2, "slow-1", 3.5, "x"]  # answers first, then errors in sent order
    assert [r.get("result") for r in replies[:2]] == [{}, {}]
    for error in replies[2:]:
        assert error["error"]["code"] == -32000
        assert "python" in error["error"]["message"] and named in error["error"]["message"]
        assert error["error"]["data"]["command"].startswith("python")
    assert b'"id":3.5,' in out  # the id goes back exactly as the host wrote it
    proc.stdin.close()


def test_requests_the_child_answered_or_the_host_cancelled_get_no_error():
    proc = subprocess.Popen(PROXY + ["--"] + CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c", "reason": "user"}}
    # key orders of other SDKs: the TypeScript SDK puts the id last, after params
    ts_style = b'{"method":"ping","params":{"id":99},"jsonrpc":"2.0","id":"ts"}\n'
    proc.stdin.write(request("c", "hang") + json.dumps(cancel).encode() + b"\n" + ts_style
                     + request(7, "hang") + request(8, "die", code=0))
    proc.stdin.flush()
    out = proc.stdout.read()
    assert proc.wait(15) == 0
    replies = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], "error" in r) for r in replies] == [("ts", False), (7, True), (8, True)]
    proc.stdin.close()


def test_child_that_exits_after_the_host_said_goodbye_adds_nothing():
    """EOF from the host is its goodbye: a clean exit then leaves unanswered requests alone, so a
    child such as `cat` still sees the exact bytes go through."""
    data = request(1, "ping") + request(2, "tools/call", name="x")
    done = subprocess.run(PROXY + ["--", "cat"], input=data, capture_output=True, timeout=30)
    assert done.returncode == 0 and done.stdout == data


# -- a side that stops reading (backpressure) ---------------------------------------------------------
@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to read memory")
def test_host_that_stops_reading_gets_backpressure_not_buffering():
    """A child writing 400 MiB to a host that reads nothing for a while: the proxy's memory stays flat."""
    writer = ("import sys\nline = b'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"p\":\"' "
              "+ b'x' * 4000 + b'\"}}\\n'\nfor _ in range(100_000): sys.stdout.buffer.write(line)\n")
    proc = subprocess.Popen(PROXY + ["--", sys.executable, "-c", writer], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(2.0)  # the host reads nothing; pipes fill, the proxy must stop reading the child
    stalled = status_kib(proc.pid)
    received = 0
    done = threading.Event()

    def drain():
        nonlocal received
        while chunk := proc.stdout.read(1 << 20):
            received += len(chunk)
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    proc.stdin.close()
    assert done.wait(120)
    assert proc.wait(30) == 0
    line = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"' + b"x" * 4000 + b'"}}\n'
    assert received == 100_000 * len(line)  # nothing lost once the host resumes
    assert stalled < 80 * 1024, f"proxy held {stalled} KiB while the host was not reading"


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to read memory")
def test_child_that_stops_reading_gets_backpressure_not_buffering():
    """A host writing 300 MiB to a child that reads nothing for two seconds: nothing piles up in the proxy."""
    reader = ("import sys, time\ntime.sleep(2.0)\nn = 0\n"
              "while chunk := sys.stdin.buffer.read(1 << 20): n += len(chunk)\n"
              "print(n, flush=True)\n")
    proc = subprocess.Popen(PROXY + ["--", sys.executable, "-c", reader], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"' + b"y" * 3000 + b'"}}\n'
    count = 100_000

    def write():
        for _ in range(count):
            proc.stdin.write(line)
        proc.stdin.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(1.5)  # the child is asleep: the pipes are full and the proxy must have stopped reading us
    stalled = status_kib(proc.pid)
    writer.join(120)
    out = proc.stdout.read()
    assert proc.wait(30) == 0
    assert int(out) == count * len(line)  # nothing lost when the child resumes
    assert stalled < 80 * 1024, f"proxy held {stalled} KiB while the child was not reading"


# -- SIGTERM during traffic -------------------------------------------------------------------------
def test_sigterm_during_traffic_delivers_everything_the_child_wrote_before_exiting():
    """The host is slow to read while the child floods it; SIGTERM reaches the proxy with replies
    queued in the pipes and in the proxy.  Every line the child wrote arrives, in order, ending with
    the goodbye it writes on SIGTERM; the request it never finished gets an error; the exit code is
    the child's."""
    proc = subprocess.Popen(PROXY + ["--"] + CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(request(1, "ping"))
    proc.stdin.flush()
    first = proc.stdout.readline()  # the proxy is up and relaying
    proc.stdin.write(request(2, "flood", count=50_000))
    proc.stdin.flush()
    time.sleep(1.0)  # the host reads nothing: the child blocks on full pipes mid-flood
    proc.send_signal(signal.SIGTERM)
    out = proc.stdout.read()
    assert proc.wait(15) == 143
    lines = [json.loads(line) for line in [first, *out.splitlines()]]
    assert lines[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    progress = [m["params"]["progress"] for m in lines if m.get("method") == "notifications/progress"]
    assert progress == list(range(len(progress))) and len(progress) > 1000  # no gap: nothing lost
    tail = lines[1 + len(progress):]
    if tail[0].get("id") == 2 and "result" in tail[0]:  # the flood may have finished before the signal
        tail = tail[1:]
    assert tail[0]["params"]["data"] == "bye"  # the child's last words arrive
    assert [t.get("id") for t in tail[1:]] in ([2], [])
    if tail[1:]:
        assert "exited with code 143" in tail[1]["error"]["message"]
    proc.stdin.close()


# -- hostile input --------------------------------------------------------------------------------
REMINDER = {"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "logger": "harn.reminder", "data": "x", "_meta": {"harn": {"reminder": {"id": "r1", "body": "x"}}}}}


def hostile_frames() -> list[bytes]:
    """Every kind, plain and carrying a reminder marker (so the pipeline decodes it), both directions."""
    deep = 10_000
    frames = [
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\xff\xfe bad utf-8 \xc3"}}',
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":"harn.reminder","data":"\xff",'
        b'"_meta":{"harn":{"reminder":{"id":"\xfe\xff","body":"\xc3\x28"}}}}}',
        b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * deep + b"]" * deep + b"}",
        b'{"jsonrpc":"2.0","method":"notifications/reminder","params":{"reminder":' + b"{\"a\":" * deep + b"1"
        + b"}" * deep + b"}}",
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"n":1e999999,"m":-1e999999,"big":' + b"9" * 5000 + b"}}",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "logger": "harn.reminder", "data": "x", "_meta": {"harn": {"reminder": {
                "id": "r2", "body": "b", "ttlTurns": 10 ** 30, "firedAtTurn": 1e308}}}}}).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"_meta":{"harn":{"reminder":'
        b'{"id":"r3","body":"b","ttlTurns":' + b"1" * 5000 + b"}}}}}",
        b'{"jsonrpc":"2.0","method":"notifications/reminder","method":"notifications/message",'
        b'"params":{"reminder":{"body":"dup"},"reminder":{"body":"again","body":""}}}',
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"_meta":{"harn":{"reminder":',
        b'{"jsonrpc":"2.0","id":6,"method":"session/inject_reminder","params":{"sessionId":"s","body":',
        b'\x00\x01\x02 {"reminder" \x7f',
        b"[]", b"[1,2,{}]", b"null", b'"reminder"', b"{}", b"   ",
        b'{"jsonrpc":"2.0","id":[],"result":{}}', b'{"jsonrpc":"2.0","id":{"a":1},"error":{"code":1,"message":"m"}}',
    ]
    frames.append(json.dumps(REMINDER).encode())
    return frames


def ping(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{}}' % i


@pytest.mark.parametrize("first", [
    b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}',
    b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}',
], ids=["mcp", "acp"])
def test_hostile_lines_fail_alone_and_ordinary_ones_pass_byte_identical(first):
    """Through `cat`, so every hostile line meets the pipeline from the host and again from the peer."""
    frames = [first]
    for i, bad in enumerate(hostile_frames() * 3):
        frames += [ping(i), bad]
    frames.append(ping(10_000))
    done = subprocess.run(PROXY + ["--", "cat"], input=b"\n".join(frames) + b"\n", capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert b"Traceback" not in done.stderr
    out = done.stdout.split(b"\n")
    pings = [line for line in out if line.startswith(b'{"jsonrpc":"2.0","id":') and b'"ping"' in line]
    assert pings == [f for f in frames if f.startswith(b'{"jsonrpc":"2.0","id":') and b'"ping"' in f]
    assert out[0] == first
    for line in out:
        if line not in frames and line:  # what the proxy wrote itself must be well-formed JSON-RPC
            assert isinstance(json.loads(line), dict), line[:200]


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to read memory")
def test_a_200_mib_line_fails_alone_and_memory_stays_below_the_line_limit():
    """The request gets an error, the pings around it their answers; while the line streams in the
    proxy holds at most the line limit (64 MiB) of it, never 200 MiB."""
    proc = subprocess.Popen(PROXY + ["--"] + CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    idle = wait_for_rss(proc.pid)
    results: list[bytes] = []
    reader = threading.Thread(target=lambda: results.extend(proc.stdout), daemon=True)
    reader.start()
    proc.stdin.write(request(1, "ping"))
    proc.stdin.write(b'{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"blob":"')
    block = b"z" * (1 << 20)
    peak = 0
    for i in range(200):
        proc.stdin.write(block)
        if i % 10 == 9:
            proc.stdin.flush()
            peak = max(peak, status_kib(proc.pid, "VmHWM"))
    proc.stdin.write(b'"}}\n' + request(2, "ping"))
    proc.stdin.flush()
    peak = max(peak, status_kib(proc.pid, "VmHWM"))
    proc.stdin.close()
    assert proc.wait(60) == 0
    reader.join(10)
    replies = [json.loads(line) for line in results]
    assert [r["id"] for r in replies if "result" in r] == [1, 2]
    [error] = [r for r in replies if "error" in r]
    assert error["id"] == "huge" and error["error"]["code"] == -32600
    assert peak - idle < 100 * 1024, f"proxy grew by {(peak - idle) // 1024} MiB for one oversize line"
