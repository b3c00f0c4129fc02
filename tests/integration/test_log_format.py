"""`--log-format text|json` on real `stdio` and `serve` processes (issue 22, point 2): text is plain
lines for a person, and the default when stderr is a terminal (a pty here); json is one JSON object
per line, written as before, and the default otherwise. Either way a peer's text reaches the
terminal with its control characters escaped, and a stderr nobody reads never stalls the proxy."""
from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from bridge.display import UNSAFE, safe_json
from tests.paths import ROOT
from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.peers.processes import free_port, proxy, wait_until

STDIO = [sys.executable, "-m", "bridge", "stdio", "--log-level", "info"]
SERVER = [sys.executable, "-m", "bridge.examples.mcp_legacy_server"]
STANDARD_HOST = {"protocolVersion": "2025-11-25", "capabilities": {"reminders": {}},
                 "clientInfo": {"name": "host", "version": "1"}}
#: a file name that, printed raw, sets the terminal's title, clears it and reverses the line; the
#: example server puts it in the reminder's dedupeKey, which the decision's log line carries
HOSTILE_PATH = "a\x1b]0;owned\x07\x1b[2J\u202e.txt"
SHOWN_PATH = r"a\x1b]0;owned\x07\x1b[2J\u202e.txt"
#: `TS LEVEL event ...` (bridge.logs.TextFormatter)
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR) +[a-z_]+( |:|$)")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def stdio_log(flags: list[str]) -> list[str]:
    """A standard host, the proxy, the legacy example server: one file change, reminded about."""
    pipe = JsonRpcPipe(STDIO + flags + ["--"] + SERVER, cwd=str(ROOT), env=ENV)
    pipe.request("initialize", STANDARD_HOST)
    _, before = pipe.request("tools/call", {"name": "touch_file", "arguments": {"path": HOSTILE_PATH}})
    assert "notifications/reminder" in [m["method"] for m in before]
    assert pipe.close() == 0
    return bytes(pipe.stderr).decode().splitlines()


def assert_json_lines(lines: list[str]) -> list[dict]:
    """Every line one JSON object, written as the proxy always wrote them: compact separators, keys in
    the order logged (`ts`, `event`, `route` first), non-ASCII as is, control characters escaped."""
    assert lines
    records = []
    for line in lines:
        record = json.loads(line)
        assert isinstance(record, dict) and line == safe_json(record), line
        assert not UNSAFE.search(line), line
        records.append(record)
    return records


def assert_text_lines(lines: list[str]) -> None:
    assert lines
    for line in lines:
        assert TEXT_LINE.match(line), line
        assert not UNSAFE.search(line), repr(line)


def rewritten(records: list[dict]) -> dict:
    """The decision on the file-change reminder."""
    [record] = [r for r in records if r["event"] == "rewritten" and "dedupe_key" in r]
    return record


def test_stdio_json_lines_are_json_objects_as_before():
    records = assert_json_lines(stdio_log(["--log-format", "json"]))
    record = rewritten(records)
    assert list(record)[:4] == ["ts", "event", "route", "level"]
    assert record["dedupe_key"] == "file_changed:" + HOSTILE_PATH  # escaped on the wire, the same value read back


def test_stdio_logs_json_when_stderr_is_a_pipe():
    assert rewritten(assert_json_lines(stdio_log([])))["level"] == "info"


def test_stdio_text_lines_are_plain_lines_with_peer_text_escaped():
    lines = stdio_log(["--log-format", "text"])
    assert_text_lines(lines)
    [line] = [line for line in lines if " rewritten " in line and "dedupe_key=" in line]
    assert " INFO    rewritten route=default protocol=mcp method=notifications/message " in line, line
    assert f"dedupe_key=file_changed:{SHOWN_PATH}" in line, line
    assert "source=legacy target=standard" in line, line


class Terminal:
    """A process whose stderr is a terminal (the slave side of a pty); what it writes there is read
    from the master side as lines."""

    def __init__(self, argv: list[str], **popen):
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stderr=slave, cwd=str(ROOT), env=ENV, **popen)
        os.close(slave)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(master,), daemon=True)
        self._reader.start()

    def _read(self, master: int) -> None:
        pending = b""
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process and every copy of the slave side are gone
                data = b""
            if not data:
                break
            pending += data
            *done, pending = pending.split(b"\n")
            self.lines.extend(line.decode().rstrip("\r") for line in done)
        os.close(master)

    def finish(self, timeout: float = 20.0) -> list[str]:
        self._reader.join(timeout)
        return self.lines


def test_stdio_logs_text_when_stderr_is_a_terminal():
    terminal = Terminal(STDIO + ["--"] + SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": STANDARD_HOST}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "touch_file", "arguments": {"path": HOSTILE_PATH}}}
    out, _ = terminal.proc.communicate(("\n".join(json.dumps(m) for m in (init, call)) + "\n").encode(), timeout=30)
    assert b'"notifications/reminder"' in out
    lines = terminal.finish()
    assert_text_lines(lines)
    assert any(" rewritten " in line and SHOWN_PATH in line for line in lines), lines


# -- serve -------------------------------------------------------------------------------------------------
def post_to(port: int) -> int:
    """One JSON-RPC request to the proxy, whose upstream is down: answered with an error naming the
    cause, and logged."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", method="POST",
                                     data=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def dead_upstream() -> list[str]:
    return ["--protocol", "mcp", "--upstream", f"http://127.0.0.1:{free_port()}/mcp"]


def serve_log(flags: list[str]) -> list[str]:
    bridge = proxy(*dead_upstream(), *flags)
    try:
        post_to(bridge.port)
        wait_until(lambda: any("upstream_error" in line for line in bridge.stderr))
    finally:
        bridge.stop()
    return bridge.stderr


@pytest.mark.parametrize("flags", [["--log-format", "json"], []], ids=["json", "default-on-a-pipe"])
def test_serve_json_lines_are_json_objects_as_before(flags):
    records = assert_json_lines(serve_log(flags))
    listening = next(r for r in records if r["event"] == "listening")
    assert list(listening)[:2] == ["event", "listen"]  # the line supervisors read: no `ts`, as before
    [error] = [r for r in records if r["event"] == "upstream_error"]
    assert list(error)[:3] == ["ts", "event", "route"]


def test_serve_text_lines_are_plain_lines():
    lines = serve_log(["--log-format", "text"])
    assert_text_lines(lines)
    [listening] = [line for line in lines if " listening " in line]
    assert " INFO    listening listen=127.0.0.1:" in listening
    [error] = [line for line in lines if " upstream_error " in line]
    assert " WARNING upstream_error route=default " in error and ": " in error


def test_serve_logs_text_when_stderr_is_a_terminal():
    terminal = Terminal([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", *dead_upstream()],
                        stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: any(" listening " in line for line in terminal.lines), timeout=20)
        port = int(re.search(r" listen=\S+:(\d+) ", next(l for l in terminal.lines if " listening " in l)).group(1))
        post_to(port)
        wait_until(lambda: any(" upstream_error " in line for line in terminal.lines))
    finally:
        terminal.proc.terminate()
        terminal.proc.wait(20)
    assert_text_lines(terminal.finish())


# -- a stderr nobody reads -----------------------------------------------------------------------------
FLOOD = [sys.executable, "-m", "tests.peers.flood_server"]


def test_a_stderr_nobody_reads_never_stalls_the_proxy(tmp_path):
    """At --log-level info every reminder is a line: 3,000 of them are far more than a pipe holds
    (64 KiB). The host never reads the proxy's stderr, yet gets every frame: lines wait in the
    log queue (or are dropped), never in the proxy's event loop."""
    unread, keep = os.pipe()
    try:
        pipe = JsonRpcPipe(STDIO + ["--"] + FLOOD, cwd=str(ROOT), env=ENV, stderr=keep)
        os.close(keep)
        keep = -1
        pipe.request("initialize", STANDARD_HOST)
        answer, before = pipe.request("tools/call", {"name": "flood", "arguments": {"count": 3000}})
        assert answer["result"]["content"][0]["text"] == "flooded 0..2999"
        assert sum(m["method"] == "notifications/reminder" for m in before) == 3000
        assert pipe.close(timeout=30) == 0  # the exit does not wait forever for the log either
    finally:
        os.close(unread)
        if keep >= 0:
            os.close(keep)
