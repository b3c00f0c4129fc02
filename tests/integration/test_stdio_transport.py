"""The stdio transport is invisible (spec §8): bytes, order, stderr, exit codes and signals."""
from __future__ import annotations

import json
import random
import signal
import subprocess
import sys

PROXY = [sys.executable, "-m", "bridge", "stdio"]


def mixed_traffic(count: int, seed: int = 7) -> list[bytes]:
    """Ordinary MCP/ACP traffic of every awkward kind; none of it concerns reminders."""
    rng = random.Random(seed)
    samples = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}),
        '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"db","data":{"ms":812}}}',
        '{ "jsonrpc" : "2.0" , "id" : "x" , "result" : { "content" : [ ] } }',  # odd spacing stays odd
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                    "params": {"name": "t", "arguments": {"text": "naïve café 中文 🚀"}}}, ensure_ascii=False),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                    "params": {"name": "t", "arguments": {"text": "naïve café 中文 🚀 \u0000 \t"}}}),  # \u escapes
        '[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]',
        "this is not JSON at all",
        '{"jsonrpc":"2.0","id":8,"result":{"n":1.0e400,"big":123456789012345678901234567890}}',
        '{"jsonrpc":"2.0","id":9,"result":{"dup":1,"dup":2}}',
        '{"jsonrpc":"2.0","id":10,"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}',
        "",
        '{"truncated": ',
    ]
    frames = [samples[0].encode()]
    for i in range(count):
        frames.append(rng.choice(samples).encode() if i % 50 else
                      json.dumps({"jsonrpc": "2.0", "id": i, "method": "bulk", "params": {"blob": "é" * rng.randint(1, 5000)}},
                                 ensure_ascii=rng.random() < 0.5).encode())
    return frames


def run_cat(frames: list[bytes], *options: str, timeout: float = 120) -> subprocess.CompletedProcess:
    data = b"\n".join(frames) + b"\n"
    return subprocess.run(PROXY + list(options) + ["--", "cat"], input=data, capture_output=True, timeout=timeout)


def test_cat_round_trip_is_byte_identical_and_in_order():
    frames = mixed_traffic(5000)
    frames.insert(2500, json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                    "params": {"level": "info", "data": "x" * (20 * 1024 * 1024)}}).encode())
    done = run_cat(frames)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == b"\n".join(frames) + b"\n"


def test_final_line_without_newline_passes_as_is():
    done = subprocess.run(PROXY + ["--", "cat"], input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"a":1}',
                          capture_output=True, timeout=30)
    assert done.stdout == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"a":1}'


def test_oversize_request_fails_alone_with_an_error():
    big = b'{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"blob":"' + b"x" * 3000 + b'"}}'
    frames = [b'{"jsonrpc":"2.0","id":1,"method":"ping"}', big, b'{"jsonrpc":"2.0","id":2,"method":"ping"}']
    done = run_cat(frames, "--max-line", "1024")
    lines = done.stdout.splitlines()
    # the proxy answers at once while the pings travel through the child, so only their order is fixed
    assert [line for line in lines if b'"ping"' in line] == [frames[0], frames[2]]
    errors = [json.loads(line) for line in lines if b'"error"' in line]
    assert len(lines) == 3 and len(errors) == 1
    assert errors[0]["id"] == 42 and errors[0]["error"]["code"] == -32600 and "1024" in errors[0]["error"]["message"]


def test_child_stderr_passes_through_and_exit_code_is_mirrored():
    done = subprocess.run(PROXY + ["--", sys.executable, "-c",
                                   "import sys; sys.stderr.write('child says hi\\n'); sys.exit(7)"],
                          input=b"", capture_output=True, timeout=30)
    assert done.returncode == 7
    assert b"child says hi\n" in done.stderr


def test_child_that_cannot_start_gives_one_clear_line():
    done = subprocess.run(PROXY + ["--", "/nonexistent/server", "--flag"], input=b"", capture_output=True, timeout=30)
    assert done.returncode == 127
    assert done.stderr.decode().strip().splitlines() == [
        "reminder-bridge: cannot start '/nonexistent/server': No such file or directory"]


def test_sigterm_is_forwarded_to_the_child_once():
    """One SIGTERM reaches the child once, its exit code mirrored. The signal lands just after the
    child's first line is relayed, while the proxy swaps its start-up handler for the running one:
    there, a second copy used to kill the child during its own SIGTERM exit (143), in about one
    start in three, so the start is repeated."""
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (print('child got SIGTERM', flush=True), sys.exit(3)))\n"
              "print('ready', flush=True)\n"
              "time.sleep(30)\n")
    for _ in range(8):
        proc = subprocess.Popen(PROXY + ["--", sys.executable, "-c", script], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert out == b"child got SIGTERM\n"
        assert proc.returncode == 3


def test_host_closing_stdin_shuts_down_cleanly_after_replies():
    """EOF from the host closes the child's stdin; replies already produced still arrive."""
    done = subprocess.run(PROXY + ["--", sys.executable, "-m", "bridge.examples.mcp_legacy_server"],
                          input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n', capture_output=True, timeout=30)
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"jsonrpc": "2.0", "id": 1, "result": {}}


# Backpressure (a host or a child that stops reading) is tested with the other faults in test_fault_stdio.py.


def test_a_stdio_proxy_without_an_admin_port_never_loads_the_http_stack():
    """aiohttp and prometheus_client cost ~13 MiB per sidecar: a host starts many stdio proxies."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "bridge", "stdio", "--", sys.executable, "-c", "pass"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0
    loaded = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "bridge.transports.stdio" in loaded
    assert not {"aiohttp", "prometheus_client", "opentelemetry.sdk"} & loaded
