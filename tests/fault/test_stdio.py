"""Fault tolerance of `reminder-bridge stdio`, with real processes: a child that dies mid-request,
a side that stops reading, SIGTERM during traffic, hostile bytes from either side, SIGHUP without
rules, stdin from /dev/null, and a host that goes away or stops reading mid-burst.

No test sleeps to let something happen: each waits for the event it means (a reply, a log line,
a process blocked on a full pipe, seen in /proc), so a slow machine only makes it slower."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

from bridge.transports.stdio import DRAIN_GRACE, KILL_GRACE, STOP_GRACE

pytestmark = pytest.mark.fault

PROXY = [sys.executable, "-m", "bridge", "stdio"]
CHILD = [sys.executable, "-m", "tests.peers.crashing_child"]
STUBBORN = [sys.executable, "-m", "tests.peers.stubborn_child"]
HAS_PROC = os.path.exists("/proc/self/status")
#: Slack on top of the proxy's own graces.  The graces are the proxy's own timers (call_later), and
#: what these tests prove is that it ends by them instead of hanging: a loaded 2-core machine can
#: delay a timer by seconds (a 5 s slack failed under load), never by a minute.
SLACK = 60.0


def request(msg_id, method: str, **params) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode() + b"\n"


def status_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_for(check, what: str, timeout: float = 30.0, times: int = 1) -> None:
    """Poll until `check()` has held `times` polls in a row (a condition seen once could be a
    passing moment), or fail naming what never happened."""
    deadline = time.monotonic() + timeout
    held = 0
    while time.monotonic() < deadline:
        held = held + 1 if check() else 0
        if held >= times:
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat(int(entry))[1]) == pid:
                    found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def child_of(pid: int) -> int:
    """The process the proxy started (its only child)."""
    found: list[int] = []
    wait_for(lambda: found.extend(children_of(pid)) or found, f"process {pid} to start its child")
    return found[0]


def running(pid: int) -> bool:
    try:
        return _stat(pid)[0] not in ("Z", "X")  # a zombie has stopped running
    except (OSError, IndexError):
        return False


def pipe_fill(pid: int, fd: int) -> tuple[int, int]:
    """(bytes waiting in, capacity of) the pipe that process `pid` holds as `fd`."""
    probe = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)  # the same pipe, one more reader
    try:
        waiting = struct.unpack("i", fcntl.ioctl(probe, termios.FIONREAD, b"\0\0\0\0"))[0]
        return waiting, fcntl.fcntl(probe, fcntl.F_GETPIPE_SZ)
    finally:
        os.close(probe)


def wchan(pid: int, tid: int | None = None) -> str | None:
    """Where in the kernel process `pid` (or its thread `tid`) waits; None where the kernel hides it."""
    try:
        with open(f"/proc/{pid}/task/{tid}/wchan" if tid else f"/proc/{pid}/wchan") as where:
            found = where.read().strip()
    except OSError:
        return None
    return found if found not in ("", "0") else None


def blocked_writing(pid: int, fd: int, tid: int | None = None) -> bool:
    """Process `pid` (or its thread `tid`) sits in the kernel on a write to its full pipe `fd`;
    where wchan is hidden, that pipe is at least half full (pages written in pieces leave some unused)."""
    where = wchan(pid, tid)
    if where is not None:
        return where.endswith("pipe_write") or where == "pipe_wait"
    waiting, size = pipe_fill(pid, fd)
    return waiting >= size // 2


def proxy_stalled(proxy: int, pid: int, fd: int, tid: int | None = None) -> bool:
    """The proxy has stopped reading the side `pid` (or its thread `tid`) writes from: that writer is
    blocked on its full pipe `fd` while the proxy's event loop sits idle in epoll (a proxy still
    reading would find that pipe readable and not wait)."""
    if not blocked_writing(pid, fd, tid):
        return False
    where = wchan(proxy)
    return where is None or "epoll" in where or where == "ep_poll"


def stop(proc: subprocess.Popen, *pids: int | None) -> None:
    """Leave nothing running behind a failed test."""
    for pid in pids:
        if pid and running(pid):
            os.kill(pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def wait_for_rss(proc: subprocess.Popen) -> int:
    """The proxy's resident size once it has started: imports done, child running, relaying (a
    ping makes the round trip)."""
    proc.stdin.write(request("up", "ping"))
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline()) == {"jsonrpc": "2.0", "id": "up", "result": {}}
    return status_kib(proc.pid)


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


def test_an_id_no_utf8_can_carry_is_relayed_answered_and_kept_in_flight_like_any_other():
    """A lone surrogate is valid JSON (`"\\ud800"`) but no UTF-8 can carry it: such a request id is
    read off the bytes like any other. The request reaches the child and its answer the host, one
    still waiting when the child dies gets its error, and the host's later requests go on."""
    proc = subprocess.Popen(PROXY + ["--"] + CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        proc.stdin.write(request("\ud800", "ping") + request("\udc00-held", "hang") + request("x", "die", code=3))
        proc.stdin.flush()  # stdin stays open: the host is still there when the child dies
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
        reader.start()
        reader.join(30)
        assert not reader.is_alive(), "the proxy stopped answering the host"
        assert proc.wait(15) == 3
        replies = [json.loads(line) for line in out[0].splitlines()]
        assert [r["id"] for r in replies] == ["\ud800", "\udc00-held", "x"]
        assert replies[0]["result"] == {} and [r["error"]["code"] for r in replies[1:]] == [-32000, -32000]
        assert b'"id":"\\udc00-held",' in out[0]  # the id goes back exactly as the host wrote it
    finally:
        stop(proc)


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


# -- a child that speaks before the proxy is ready -------------------------------------------------------
@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to see the child blocked")
def test_what_a_child_says_while_the_proxy_still_starts_all_reaches_a_host_not_reading_yet():
    """The child starts before the proxy's imports (cold start) and writes 8 MB at once, to a host
    that reads nothing until the child sits blocked: every frame arrives, in order.  (The proxy
    once relayed the child's first read before the host's stdout was set up, with plain writes
    that failed on the full pipe, and lost those frames.)"""
    writer = ("import sys\nfor i in range(2000): sys.stdout.buffer.write(b'{\"jsonrpc\":\"2.0\",\"method\":\"n\","
              "\"params\":{\"i\":%d,\"p\":\"' % i + b'x' * 4000 + b'\"}}\\n')\n")
    proc = subprocess.Popen(PROXY + ["--", sys.executable, "-c", writer], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        child = child_of(proc.pid)
        wait_for(lambda: blocked_writing(child, 1), "the child to fill every pipe toward the host", times=5)
        out, err = proc.communicate(timeout=60)  # reads it all, and closes stdin: the host's goodbye
        assert [json.loads(line)["params"]["i"] for line in out.splitlines()] == list(range(2000))
        assert b"Traceback" not in err and b"BlockingIOError" not in err, err[-2000:]
    finally:
        stop(proc)


# -- a side that stops reading (backpressure) ---------------------------------------------------------
@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to read memory")
def test_host_that_stops_reading_gets_backpressure_not_buffering():
    """A child writing 400 MiB to a host that reads nothing for a while: the proxy's memory stays flat."""
    writer = ("import sys\nline = b'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"p\":\"' "
              "+ b'x' * 4000 + b'\"}}\\n'\nfor _ in range(100_000): sys.stdout.buffer.write(line)\n")
    proc = subprocess.Popen(PROXY + ["--", sys.executable, "-c", writer], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    child = child_of(proc.pid)
    # the host reads nothing: once the child sits blocked on its full pipe while the proxy idles,
    # the proxy has stopped reading it (a proxy that buffered instead would never get here)
    wait_for(lambda: proxy_stalled(proc.pid, child, 1), "the proxy to stop reading the child", times=5)
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
    """A host writing 300 MiB to a child that reads nothing until told: nothing piles up in the proxy."""
    reader = ("import signal, sys\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
              "print('ready', flush=True)\nsignal.sigwait({signal.SIGUSR1})\nn = 0\n"
              "while chunk := sys.stdin.buffer.read(1 << 20): n += len(chunk)\n"
              "print(n, flush=True)\n")
    proc = subprocess.Popen(PROXY + ["--", sys.executable, "-c", reader], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"' + b"y" * 3000 + b'"}}\n'
    count = 100_000
    tid: list[int] = []

    def write():
        tid.append(threading.get_native_id())
        for _ in range(count):
            proc.stdin.write(line)
        proc.stdin.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert proc.stdout.readline() == b"ready\n"  # the child waits for SIGUSR1 before it reads
    child = child_of(proc.pid)
    # the child's stdin is full and our write blocks: the proxy has stopped reading us
    wait_for(lambda: tid and proxy_stalled(proc.pid, os.getpid(), proc.stdin.fileno(), tid[0]),
             "the proxy to stop reading the host", times=5)
    stalled = status_kib(proc.pid)
    os.kill(child, signal.SIGUSR1)
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
    child = child_of(proc.pid)
    proc.stdin.write(request(2, "flood", count=50_000))
    proc.stdin.flush()
    # the host reads nothing: the child blocks on full pipes mid-flood
    wait_for(lambda: proxy_stalled(proc.pid, child, 1), "the child to block mid-flood", times=5)
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
    idle = wait_for_rss(proc)
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


# -- SIGHUP, odd stdin, and hosts that go away -----------------------------------------------------
INITIALIZE = request("init", "initialize", protocolVersion="2025-11-25", capabilities={},
                     clientInfo={"name": "fault", "version": "1"})


def log_events(path, event: str) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if f'"event": "{event}"'.encode() in line]


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
def test_sighup_without_a_rules_file_is_logged_and_ignored(tmp_path):
    """Without --rules there is nothing to reload: SIGHUP must neither kill the proxy (the default
    action, which left the child running) nor reach the child (crashing_child dies of it)."""
    log = tmp_path / "stderr"
    with open(log, "wb") as err:
        proc = subprocess.Popen(PROXY + ["--"] + CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    child = None
    try:
        proc.stdin.write(request(1, "ping"))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1  # up: its signal handlers are in place
        child = child_of(proc.pid)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_events(log, "reload_skipped") or proc.poll() is not None, "the proxy to log the SIGHUP")
        assert proc.poll() is None, f"SIGHUP ended the proxy (exit {proc.returncode}); child running: {running(child)}"
        [skipped] = log_events(log, "reload_skipped")
        assert skipped["why"] == "no rules file was given" and skipped["trigger"] == "SIGHUP"
        proc.stdin.write(request(2, "ping"))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}  # both still work
        assert running(child)
        proc.stdin.close()
        assert proc.wait(15) == 0
        assert len(log_events(log, "reload_skipped")) == 1
    finally:
        stop(proc, child)


def test_stdin_from_dev_null_is_an_immediate_eof():
    """/dev/null cannot be watched by epoll (EPERM): it must read as EOF at once, with no traceback;
    the child sees its stdin closed and the proxy exits with the child's code."""
    script = "import sys\nprint(len(sys.stdin.buffer.read()), flush=True)\nsys.exit(5)\n"
    try:
        done = subprocess.run(PROXY + ["--", sys.executable, "-c", script], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=20)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the proxy never passed the EOF on: {(exc.stderr or b'')[-1500:]!r}")
    assert b"Traceback" not in done.stderr and b"PermissionError" not in done.stderr, done.stderr[-3000:]
    assert done.stdout == b"0\n"
    assert done.returncode == 5


def start_flood(tmp_path, child: list[str], first: bytes = INITIALIZE,
                stderr_pipe: bool = False) -> tuple[subprocess.Popen, int]:
    """A proxy whose child floods toward a host that reads nothing, once the burst has backed up
    into every pipe (the child sits blocked on its write).  Its stderr goes to a file, or with
    `stderr_pipe` to a pipe the host holds (and may close: a host that dies closes all three)."""
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(PROXY + ["--"] + child, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if stderr_pipe else err)
    proc.stdin.write(first)  # the initialize: the burst goes through the pipeline, not around it
    proc.stdin.flush()
    pid = child_of(proc.pid)
    # read once the child and our stdin are on the loop: the child blocked on its pipe while the proxy
    # still starts looks stalled too, and the burst would not go through the pipeline
    wait_for(lambda: pipe_fill(proc.pid, 0)[0] == 0, "the proxy to read the initialize")
    wait_for(lambda: proxy_stalled(proc.pid, pid, 1), "the burst to fill the pipes", times=5)
    return proc, pid


def ended_within(proc: subprocess.Popen, budget: float, what: str) -> int:
    try:
        return proc.wait(budget)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the proxy was still running {budget:.0f} s after {what}")


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
@pytest.mark.parametrize("closes, flags, then, code", [
    ("all", [], None, 128 + signal.SIGTERM),
    ("all", ["--ignore-term"], None, 128 + signal.SIGKILL),
    ("stdout", ["--ignore-term"], None, 128 + signal.SIGKILL),
    ("all", ["--ignore-term"], signal.SIGTERM, 128 + signal.SIGKILL),
], ids=["dies-child-obeys", "dies-child-ignores-sigterm", "closes-stdout-only", "dies-then-sigterm"])
def test_a_host_that_goes_away_mid_burst_stops_the_child_and_the_proxy(tmp_path, closes, flags, then, code):
    """The host goes away with a burst in flight: the proxy stops its child (SIGTERM, then SIGKILL
    for one that ignores it) and exits, instead of waiting forever on a pipe nobody reads.  A host
    that dies takes stderr with it: the proxy's log lines then fail, and must not stop it."""
    proc, child = start_flood(tmp_path, STUBBORN + ["--flood", *flags], stderr_pipe=closes == "all")
    try:
        proc.stdout.close()  # the host's end of the proxy's stdout: further writes get EPIPE
        if closes == "all":
            proc.stdin.close()
            proc.stderr.close()
        budget = STOP_GRACE + KILL_GRACE + SLACK
        if then is not None:
            proc.send_signal(then)
            budget = DRAIN_GRACE + SLACK
        assert ended_within(proc, budget, "its host went away") == code
        wait_for(lambda: not running(child), "the child to be gone", timeout=5)
        if closes == "stdout":  # stderr still there: the proxy says what it did, and nothing else
            log = tmp_path / "stderr"
            assert log_events(log, "host_gone") and b"Traceback" not in log.read_bytes(), log.read_bytes()[-3000:]
    finally:
        stop(proc, child)


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
def test_a_host_gone_while_the_proxy_is_still_starting_still_stops_the_child(tmp_path):
    """The host's end of our stdout is closed before the proxy has put its child on the loop: the
    child is stopped all the same, and the proxy ends.  (Found by the test above, whose stall check
    can pass while the proxy is still starting: the proxy logged host_gone, then ran for ever
    reading its flooding child.)  A pipe with no reader at all makes that order certain."""
    read, write = os.pipe()
    os.close(read)
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(PROXY + ["--"] + STUBBORN + ["--flood", "--ignore-term"], stdin=subprocess.PIPE,
                                stdout=write, stderr=err)
    os.close(write)
    child = None
    try:
        child = child_of(proc.pid)
        assert ended_within(proc, STOP_GRACE + KILL_GRACE + SLACK, "its host went away") == 128 + signal.SIGKILL
        wait_for(lambda: not running(child), "the child to be gone", timeout=5)
        assert log_events(tmp_path / "stderr", "host_gone") and log_events(tmp_path / "stderr", "child_stopping")
    finally:
        stop(proc, child)


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
@pytest.mark.parametrize("child", [CHILD, STUBBORN + ["--flood", "--ignore-term"]], ids=["child-stuck-on-its-goodbye",
                                                                                       "child-ignores-sigterm"])
def test_sigterm_ends_the_proxy_within_the_drain_grace_while_the_host_is_not_reading(tmp_path, child):
    """The host is alive but reads nothing, every pipe is full: SIGTERM still ends the proxy (and
    its child) within the drain grace.  crashing_child answers SIGTERM by writing a goodbye, which
    blocks on the full pipe; the stubborn child ignores SIGTERM."""
    first = request(1, "flood", count=10_000_000) if child is CHILD else INITIALIZE
    proc, pid = start_flood(tmp_path, child, first)
    try:
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert ended_within(proc, DRAIN_GRACE + SLACK, "SIGTERM") == 128 + signal.SIGKILL
        # the grace is given in full (a timer never fires early, so load cannot break this bound)
        assert time.monotonic() - sent >= DRAIN_GRACE
        wait_for(lambda: not running(pid), "the child to be gone", timeout=5)
        assert log_events(tmp_path / "stderr", "drain_grace_expired")
    finally:
        stop(proc, pid)


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` installed (its SigCgt mask in /proc)."""
    return bool(int(status_field(pid, "SigCgt"), 16) >> (sig - 1) & 1)


def status_field(pid: int, field: str) -> str:
    with open(f"/proc/{pid}/status") as status:
        return next(line.split()[1] for line in status if line.startswith(field + ":"))


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
def test_sigterm_while_the_proxy_is_still_starting_ends_it_by_the_drain_grace(tmp_path):
    """A SIGTERM while the proxy is still importing (its child, started first, already runs) is
    forwarded to the child; a child that ignores it must not keep the proxy for ever: the drain
    grace still ends both.  (Found by the test above, which under load signalled a proxy still
    starting and waited a minute for nothing.)  The child ignores SIGTERM from birth: the proxy is
    started with SIGTERM ignored, which the child inherits and the proxy's own handler replaces."""
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(PROXY + ["--"] + STUBBORN, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    pid = None
    try:
        pid = child_of(proc.pid)
        wait_for(lambda: catches(proc.pid, signal.SIGTERM), "the proxy's start-up handler for SIGTERM")
        proc.send_signal(signal.SIGTERM)  # the proxy is still importing its pipeline (or, on a fast day, just done)
        assert ended_within(proc, DRAIN_GRACE + SLACK, "SIGTERM") == 128 + signal.SIGKILL
        wait_for(lambda: not running(pid), "the child to be gone", timeout=5)
        assert log_events(tmp_path / "stderr", "drain_grace_expired")
    finally:
        stop(proc, pid)


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to find the child")
@pytest.mark.parametrize("flags, code", [([], 128 + signal.SIGTERM), (["--ignore-term"], 128 + signal.SIGKILL)],
                         ids=["obeys-sigterm", "ignores-sigterm"])
def test_a_child_that_outlives_the_hosts_goodbye_is_stopped(flags, code):
    """EOF is the host's goodbye (MCP's stdio shutdown): a child that neither exits nor says anything
    more gets SIGTERM after a grace, then SIGKILL, and the proxy exits with its code."""
    proc = subprocess.Popen(PROXY + ["--"] + STUBBORN + flags, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    child = None
    try:
        assert b'"ready"' in proc.stdout.readline()
        child = child_of(proc.pid)
        proc.stdin.close()
        assert ended_within(proc, STOP_GRACE + KILL_GRACE + SLACK, "its host said goodbye") == code
        assert proc.stdout.read() == b""
        wait_for(lambda: not running(child), "the child to be gone", timeout=5)
    finally:
        stop(proc, child)
