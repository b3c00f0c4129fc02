"""`python -m bench --peers`: the MCP proxies users pick, side by side with reminder-bridge, each in
every position it can take, in front of the same servers, in one run.

Positions (host side → server side) and who takes them:

- HTTP → HTTP: reminder-bridge `serve`, nginx (a plain reverse proxy: the floor of any HTTP hop),
  the bare aiohttp relay (bench/http_relay.py), FastMCP's `create_proxy`;
- stdio → stdio: reminder-bridge `stdio`, FastMCP;
- HTTP → stdio: reminder-bridge `serve --upstream-command`, FastMCP, sparfenyuk `mcp-proxy`,
  `supergateway` (stateful and stateless), ContextForge `mcpgateway.translate`;
- stdio → HTTP: reminder-bridge `stdio --upstream`, FastMCP, `mcp-proxy`, `supergateway`.

reminder-bridge's rows in the two bridging positions say "not available in this build" until its
`--help` offers the flag. Peers are installed apart from the project (bench/peer_install.py); one
that cannot be installed or started gets a row that says why.

Each row: CPU per `tools/call` (the proxy and every process it started, the long-lived server
excepted; a server started per request counts) with 10 keep-alive clients (10 requests in flight
on a stdio host); p50 and p99 added to a call with one client, against the server spoken to
directly in its own transport; resident memory per session; and what becomes of 20 legacy
reminders the server sends during one call, at a host that declares standard reminders and at a
host without reminder support (counted on the call's own answer: its SSE stream, or the lines
before its answer on stdio).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench import peer_install
from bench.load import closed_loop, connect, cut, post
from bench.mcp_http import STANDARD_HOST, handshake, messages, session_headers
from bench.procs import (
    PY, Process, bridge, command_line, cpu_seconds, descendants, pct, peer, reaped_cpu_seconds, relay_http, rss_kib,
)

ROOT = Path(__file__).resolve().parents[1]
#: the stdio server every stdio position wraps, run as a script so any peer's child can run it
STDIO_SERVER = [PY, str(ROOT / "bench" / "peers.py"), "mcp-flood"]
SERVER_MARK = "peers.py mcp-flood"  # how a server process is told apart from the proxy's own
FASTMCP_SCRIPT = str(ROOT / "bench" / "fastmcp_proxy.py")
REMINDERS = 20
PLAIN_HOST: dict = {}
POSITIONS = ("HTTP → HTTP", "stdio → stdio", "HTTP → stdio", "stdio → HTTP")


@dataclass
class Launch:
    """How to run one proxy in one position: ``argv`` and where its port comes from (`stdout`:
    a `PORT <n>` line; `stderr`: reminder-bridge's `listening` line; an int: the port its command
    line names). A stdio host runs ``argv`` once per session."""
    argv: list[str]
    announce: str | int | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None


@dataclass
class Setting:
    """What the launchers need: the HTTP server's URL, a scratch directory, the installed peers."""
    upstream: str
    scratch: str
    installed: dict[str, object] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- who takes which position ----------------------------------------------------------------------
def _not_built(flag: str, command: str) -> str:
    """The row of a position reminder-bridge cannot take yet (issue 23, point 1)."""
    return f"not available in this build (`reminder-bridge {command} --help` offers no {flag})"


def _reminder_bridge(position: str, setting: Setting) -> Launch | str:
    url = setting.upstream + "/mcp"
    if position == "HTTP → HTTP":
        return Launch(bridge("serve", "--listen", "127.0.0.1:0", "--protocol", "mcp", "--upstream",
                             setting.upstream), "stderr")
    if position == "stdio → stdio":
        return Launch(bridge("stdio", "--", *STDIO_SERVER))
    if position == "HTTP → stdio":
        if not setting.flags.get("upstream-command"):
            return _not_built("--upstream-command", "serve")
        return Launch(bridge("serve", "--listen", "127.0.0.1:0", "--protocol", "mcp", "--upstream-command", "--",
                             *STDIO_SERVER), "stderr")
    if not setting.flags.get("upstream"):
        return _not_built("--upstream", "stdio")
    return Launch(bridge("stdio", "--upstream", url))


def _nginx(position: str, setting: Setting) -> Launch | str:
    binary = peer_install.nginx()
    if binary is None:
        return "not installed (apt-get install nginx)"
    port, home = free_port(), tempfile.mkdtemp(prefix="nginx-", dir=setting.scratch)
    upstream = setting.upstream.removeprefix("http://")
    temp = " ".join(f"{kind}_temp_path {home}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    Path(home, "nginx.conf").write_text(
        f"daemon off; worker_processes 1; pid {home}/nginx.pid; error_log {home}/error.log warn;\n"
        "events { worker_connections 4096; }\n"
        # keep-alive as long as the run: nginx's defaults (1,000 requests, 75 s) close a load connection midway
        f"http {{ access_log off; keepalive_requests 10000000; keepalive_timeout 600s; {temp}\n"
        f"  upstream server {{ server {upstream}; keepalive 64; }}\n"
        f"  server {{ listen 127.0.0.1:{port};\n"
        "    location / { proxy_pass http://server; proxy_http_version 1.1; proxy_set_header Connection \"\";\n"
        "                 proxy_buffering off; proxy_request_buffering off; } } }\n")
    return Launch([binary, "-p", home, "-c", f"{home}/nginx.conf", "-e", f"{home}/error.log"], port)


def _fastmcp(position: str, setting: Setting) -> Launch | str:
    got = setting.installed["fastmcp"]
    if isinstance(got, str):
        return got
    host, server = _sides(position)
    upstream = [setting.upstream + "/mcp"] if server == "http" else ["--", *STDIO_SERVER]
    return Launch([str(got.python), FASTMCP_SCRIPT, host, *upstream], "stdout" if host == "http" else None)


def _bridge(key: str, stdio_host: Callable[[str, str], list[str]],
            http_host: Callable[[str, int], list[str]]) -> Callable[[str, Setting], Launch | str]:
    """A transport bridge run by its own program: ``stdio_host(program, url)`` in front of the
    HTTP server, ``http_host(program, port)`` in front of the stdio server."""
    def launch(position: str, setting: Setting) -> Launch | str:
        got = setting.installed[key]
        if isinstance(got, str):
            return got
        program = str(got.program)
        if position == "stdio → HTTP":
            return Launch(stdio_host(program, setting.upstream + "/mcp"))
        port = free_port()
        return Launch(http_host(program, port), port)
    return launch


_mcp_proxy = _bridge(
    "mcp-proxy", lambda program, url: [program, "--transport", "streamablehttp", "--log-level", "WARNING", url],
    lambda program, port: [program, "--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING",
                           *STDIO_SERVER])


def _supergateway(stateful: bool) -> Callable[[str, Setting], Launch | str]:
    return _bridge(
        "supergateway", lambda program, url: [program, "--streamableHttp", url, "--logLevel", "none"],
        lambda program, port: [program, "--stdio", shlex.join(STDIO_SERVER), "--outputTransport", "streamableHttp",
                               *(["--stateful"] if stateful else []), "--port", str(port), "--logLevel", "none"])


def _contextforge(position: str, setting: Setting) -> Launch | str:
    got = setting.installed["contextforge"]
    if isinstance(got, str):
        return got
    home = tempfile.mkdtemp(prefix="contextforge-", dir=setting.scratch)  # its SQLite file and logs stay here
    env = {**os.environ, **_contextforge_secrets(str(got.python), home), "DATABASE_URL": f"sqlite:///{home}/mcp.db"}
    port = free_port()
    return Launch([str(got.python), "-m", "mcpgateway.translate", "--logLevel", "error", "--stdio",
                   shlex.join(STDIO_SERVER), "--expose-streamable-http", "--port", str(port)], port, env=env, cwd=home)


def _contextforge_secrets(python: str, home: str) -> dict[str, str]:
    """The secrets ContextForge refuses to start without, made by its own `init_secrets`."""
    said = subprocess.run([python, "-m", "mcpgateway.scripts.init_secrets", "--stdout"], capture_output=True, text=True,
                          timeout=120, cwd=home, check=True).stdout
    return dict(line.split("=", 1) for line in said.splitlines() if re.match(r"[A-Z_]+=", line))


def _bare_relay(position: str, setting: Setting) -> Launch | str:
    return Launch(relay_http(setting.upstream), "stdout")


@dataclass(frozen=True)
class Proxy:
    """One proxy of the table: the positions it takes, how to launch it there, and the package
    bench/peer_install.py installs for it (None: reminder-bridge itself, or on the machine)."""
    positions: tuple[str, ...]
    launch: Callable[[str, Setting], Launch | str]
    package: str | None = None


PROXIES: dict[str, Proxy] = {
    "reminder-bridge": Proxy(POSITIONS, _reminder_bridge),
    "nginx": Proxy(("HTTP → HTTP",), _nginx),
    "bare aiohttp relay": Proxy(("HTTP → HTTP",), _bare_relay),
    "FastMCP proxy": Proxy(POSITIONS, _fastmcp, "fastmcp"),
    "mcp-proxy": Proxy(("HTTP → stdio", "stdio → HTTP"), _mcp_proxy, "mcp-proxy"),
    "supergateway (stateful)": Proxy(("HTTP → stdio",), _supergateway(True), "supergateway"),
    "supergateway (stateless)": Proxy(("HTTP → stdio",), _supergateway(False), "supergateway"),
    "supergateway": Proxy(("stdio → HTTP",), _supergateway(False), "supergateway"),
    # (its `--connect-streamable-http` without `--stdioCommand` only prints the server's GET stream: no stdio host)
    "ContextForge translate": Proxy(("HTTP → stdio",), _contextforge, "contextforge"),
}
INSTALLS = tuple(dict.fromkeys(p.package for p in PROXIES.values() if p.package))


def _sides(position: str) -> tuple[str, str]:
    host, server = position.split(" → ")
    return host.lower(), server.lower()


def bridge_flags() -> dict[str, bool]:
    """Which transport-bridging flags this reminder-bridge offers (issue 23, point 1)."""
    def offers(command: str, flag: str) -> bool:
        said = subprocess.run(bridge(command, "--help"), capture_output=True, text=True, timeout=60)
        return re.search(rf"(^|\s|\[){re.escape(flag)}(\s|=|\]|$)", said.stdout, re.M) is not None
    return {"upstream": offers("stdio", "--upstream"), "upstream-command": offers("serve", "--upstream-command")}


# -- what reaches the host -------------------------------------------------------------------------
def survived(found: list[dict]) -> dict[str, int]:
    """How the reminders among ``found`` (messages a host got during one `flood` call) arrived."""
    forms = {"standard": 0, "legacy": 0, "log text": 0, "rendered": 0}
    for msg in found:
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if msg.get("method") == "notifications/reminder":
            forms["standard"] += 1
        elif ((params.get("_meta") or {}).get("harn") or {}).get("reminder"):
            forms["legacy"] += 1
        elif msg.get("method") == "notifications/message" and "Build " in json.dumps(params):
            forms["log text"] += 1
        elif "result" in msg:  # reminders a proxy rendered into the call's answer
            forms["rendered"] += len(set(re.findall(r"Build (\d+) failed", json.dumps(msg["result"]))))
    return forms


def said(forms: dict[str, int]) -> str:
    """``forms`` in words: "20 standard", "20 legacy (intact)", "20 log text (metadata dropped)"..."""
    words = {"standard": "standard", "legacy": "legacy, intact", "log text": "log text only (metadata dropped)",
             "rendered": "rendered into the result"}
    parts = [f"{n} {words[form]}" for form, n in forms.items() if n]
    return ", ".join(parts) if parts else "none"


# -- measuring one proxy -------------------------------------------------------------------------
def _own(pid: int, servers: bool) -> list[int]:
    """``pid`` and what it started, with or without the servers among them (the proxy's own
    command line may name the server: it is never one)."""
    return [p for p in descendants(pid) if servers or p == pid or SERVER_MARK not in command_line(p)]


def proxy_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and what it started, the long-lived server excepted (servers it
    started and reaped count: a server per request is that design's cost)."""
    return sum(cpu_seconds(p) + reaped_cpu_seconds(p) for p in _own(pid, servers=False))


def proxy_rss_kib(pid: int, servers: bool) -> int:
    return sum(rss_kib(p) for p in _own(pid, servers))


def _call(port: int, headers: dict[str, str], name: str, arguments: dict, call_id: int) -> bytes:
    return post(port, "/mcp", json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments}}).encode(), headers)


def _check(status: int, body: bytes) -> None:
    if status != 200 or b'"result"' not in body:
        raise RuntimeError(f"tools/call failed: {status} {body[:300]!r}")


async def http_host(port: int, pid: int, direct: "Direct", calls: int, seconds: float) -> dict:
    """Latency (each call beside one to the server direct), CPU, memory and reminders through
    whatever listens on ``port`` (the proxy ``pid``)."""
    session, version = await handshake(port)
    headers = session_headers(session, version)
    conn = await connect(port)
    try:
        samples, baseline = [], []
        for i in range(calls):
            baseline.append(direct.trip(i))
            started = time.perf_counter()
            status, _, body = await conn.request(_call(port, headers, "echo", {"text": f"hi {i}"}, i + 1))
            samples.append((time.perf_counter() - started) * 1e3)
            _check(status, body)
    finally:
        conn.close()
    used, started = proxy_cpu(pid), time.perf_counter()
    done, _ = await closed_loop(port, lambda i: _call(port, headers, "echo", {"text": f"x{i}"}, calls + 1 + i), 10,
                                seconds, _check)
    cpu_us = (proxy_cpu(pid) - used) / max(done, 1) * 1e6
    rate = done / (time.perf_counter() - started)
    reminders = {}
    for host, capabilities in (("standard host", STANDARD_HOST), ("host without support", PLAIN_HOST)):
        s, v = await handshake(port, capabilities)
        conn = await connect(port)
        try:
            status, _, body = await conn.request(_call(port, session_headers(s, v), "flood", {"count": REMINDERS}, 7))
        finally:
            conn.close()
        _check(status, body)
        reminders[host] = survived(messages(body))
    before = proxy_rss_kib(pid, servers=True)
    for _ in range(20):
        await handshake(port)
    per_session = (proxy_rss_kib(pid, servers=True) - before) * 1024 / 20
    return {"latency_ms": samples, "direct_ms": baseline, "cpu_us": cpu_us, "calls_per_s": rate,
            "bytes_per_session": per_session, "reminders": reminders}


class StdioHost:
    """A host that runs ``argv`` and talks to it over its stdin and stdout."""

    def __init__(self, launch: Launch, capabilities: dict):
        self.proc = subprocess.Popen(launch.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0, env=launch.env, cwd=launch.cwd)
        self.buffered = b""
        self.next_id = 1
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, *msgs: dict) -> None:
        os.write(self.proc.stdin.fileno(), b"".join(json.dumps(m).encode() + b"\n" for m in msgs))

    def request(self, method: str, params: dict) -> list[dict]:
        """Send one request; every message read until its answer, the answer last."""
        msg_id = self.next_id
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.until({msg_id})

    def until(self, ids: set[int], deadline: float = 120.0) -> list[dict]:
        got: list[dict] = []
        waiting = set(ids)
        stop = time.monotonic() + deadline
        while waiting:
            while b"\n" not in self.buffered:
                if time.monotonic() > stop:
                    raise TimeoutError(f"no answer to {sorted(waiting)[:3]} within {deadline} s")
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise ConnectionError(f"the proxy closed its output (exit {self.proc.poll()})")
                self.buffered += chunk
            line, _, self.buffered = self.buffered.partition(b"\n")
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # a peer that logs to the protocol stream: the host skips what is not JSON
            if not isinstance(msg, dict):
                continue
            if "method" in msg and "id" in msg:  # the proxy asks the host something (roots, ping)
                self.write({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
                continue
            got.append(msg)
            if msg.get("id") in waiting and ("result" in msg or "error" in msg):
                waiting.discard(msg["id"])
        return got

    def call(self, name: str, arguments: dict) -> list[dict]:
        got = self.request("tools/call", {"name": name, "arguments": arguments})
        if "result" not in got[-1]:
            raise RuntimeError(f"tools/call {name} failed: {got[-1]}")
        return got

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            for pid in reversed(descendants(self.proc.pid)):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            self.proc.wait()


def stdio_host(launch: Launch, direct: "Direct", calls: int, seconds: float) -> dict:
    host = StdioHost(launch, STANDARD_HOST)
    try:
        samples, baseline = [], []
        for i in range(calls):
            baseline.append(direct.trip(i))
            started = time.perf_counter()
            host.call("echo", {"text": f"hi {i}"})
            samples.append((time.perf_counter() - started) * 1e3)
        used, started, done = proxy_cpu(host.proc.pid), time.perf_counter(), 0
        while time.perf_counter() - started < seconds:  # 10 requests in flight, answered, 10 more
            first = host.next_id
            host.write(*({"jsonrpc": "2.0", "id": first + k, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": f"x{k}"}}} for k in range(10)))
            host.next_id += 10
            host.until(set(range(first, first + 10)))
            done += 10
        cpu_us = (proxy_cpu(host.proc.pid) - used) / done * 1e6
        rate = done / (time.perf_counter() - started)
        per_session = proxy_rss_kib(host.proc.pid, servers=False) * 1024
        reminders = {"standard host": survived(host.call("flood", {"count": REMINDERS}))}
    finally:
        host.close()
    plain = StdioHost(launch, PLAIN_HOST)
    try:
        reminders["host without support"] = survived(plain.call("flood", {"count": REMINDERS}))
    finally:
        plain.close()
    return {"latency_ms": samples, "direct_ms": baseline, "cpu_us": cpu_us, "calls_per_s": rate,
            "bytes_per_session": per_session, "reminders": reminders}


class Direct:
    """The server spoken to directly in its own transport, one call at a time: the baseline each
    proxied call is measured beside (so drift on the machine hits both alike)."""

    def __init__(self, server: str, port: int):
        self.port = port
        self.pipe = StdioHost(Launch(STDIO_SERVER), STANDARD_HOST) if server == "stdio" else None
        if self.pipe is None:
            session, version = asyncio.run(handshake(port))
            self.headers = session_headers(session, version)
            self.sock = socket.create_connection(("127.0.0.1", port))

    def trip(self, i: int) -> float:
        """One `tools/call` answered: ms."""
        started = time.perf_counter()
        if self.pipe is not None:
            self.pipe.call("echo", {"text": f"hi {i}"})
        else:
            self.sock.sendall(_call(self.port, self.headers, "echo", {"text": f"hi {i}"}, i + 1))
            buffer = bytearray()
            while (answer := cut(buffer)) is None:
                buffer += self.sock.recv(1 << 16)
            _check(answer[0], answer[2])
        return (time.perf_counter() - started) * 1e3

    def close(self) -> None:
        if self.pipe is not None:
            self.pipe.close()
        else:
            self.sock.close()


def measure(name: str, position: str, setting: Setting, upstream_port: int, calls: int, seconds: float) -> dict:
    """One row: the proxy ``name`` in ``position``, or a row saying why it has none."""
    scenario = f"peers {position}: {name}"
    try:
        launch = PROXIES[name].launch(position, setting)
    except (OSError, subprocess.SubprocessError) as exc:
        launch = f"could not be set up: {exc}"[:200]
    if isinstance(launch, str):
        return {"scenario": scenario, "skipped": launch}
    host, server = _sides(position)
    try:
        direct = Direct(server, upstream_port)
        try:
            if host == "http":
                with Process(launch.argv, launch.announce if isinstance(launch.announce, str) else None,
                             port=launch.announce if isinstance(launch.announce, int) else 0,
                             env=launch.env, cwd=launch.cwd) as proxy:
                    got = asyncio.run(asyncio.wait_for(http_host(proxy.port, proxy.pid, direct, calls, seconds), 600))
            else:
                got = stdio_host(launch, direct, calls, seconds)
        finally:
            direct.close()
    except (OSError, RuntimeError, TimeoutError, ValueError, KeyError, StopIteration) as exc:
        return {"scenario": scenario, "skipped": f"failed: {type(exc).__name__}: {exc}"[:240]}
    lat, baseline = got["latency_ms"], got["direct_ms"]  # every sample stays in the JSON
    added50 = statistics.median(lat) - statistics.median(baseline)
    added99 = pct(lat, 0.99) - pct(baseline, 0.99)
    values = {"position": position, "proxy": name, "added_p50_ms": added50, "added_p99_ms": added99,
              "p50_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99), "direct_p50_ms": statistics.median(baseline),
              "direct_p99_ms": pct(baseline, 0.99), "version": _version(name, setting), **got}
    standard, plain = got["reminders"]["standard host"], got["reminders"]["host without support"]
    return {"scenario": scenario, "unit": "µs CPU per call",
            "proxy": f"{got['cpu_us']:,.0f} µs/call, {added50:+.2f}/{added99:+.2f} ms p50/p99, "
                     f"{got['bytes_per_session'] / 1024:,.1f} KiB/session",
            "direct": f"reminders: standard host {said(standard)}; without support {said(plain)}",
            "ratio": f"{got['calls_per_s']:,.0f} calls/s at 10", "goal": "(reported)", "met": None, "values": values}


def _version(name: str, setting: Setting) -> str:
    package = PROXIES[name].package
    return getattr(setting.installed.get(package), "version", "") if package else ""


def run(quick: bool, offline: bool = False) -> list[dict]:
    calls, seconds = (100, 2.0) if quick else (500, 5.0)
    rows = []
    with ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-peers-"))
        server = stack.enter_context(peer("mcp-http"))
        setting = Setting(f"http://127.0.0.1:{server.port}", scratch,
                          {key: peer_install.ensure(key, offline) for key in INSTALLS}, bridge_flags())
        for position in POSITIONS:
            for name, proxy in PROXIES.items():
                if position in proxy.positions:
                    print(f"    {position}: {name}", file=sys.stderr, flush=True)
                    rows.append(measure(name, position, setting, server.port, calls, seconds))
    return rows




def size(nbytes: float) -> str:
    return f"{nbytes / 1024:,.1f} KiB" if abs(nbytes) < 1 << 20 else f"{nbytes / (1 << 20):,.1f} MiB"


def table(rows: list[dict]) -> list[str]:
    """The peers rows as a table of their own, one line per proxy and position, in the order they
    ran (a row without numbers gives its reason after the proxy's name)."""
    header = ("position", "proxy", "CPU/call", "added p50/p99", "per session", "calls/s", "reminders: standard host",
              "host without support")
    lines: list[tuple[str, ...]] = []
    for row in rows:
        position, _, name = row["scenario"].removeprefix("peers ").partition(": ")
        if "skipped" in row:
            lines.append((position, name, row["skipped"]))
            continue
        v = row["values"]
        lines.append((position, f"{name} {v['version']}".strip(), f"{v['cpu_us']:,.0f} µs",
                      f"{v['added_p50_ms']:+.2f}/{v['added_p99_ms']:+.2f} ms", size(v["bytes_per_session"]),
                      f"{v['calls_per_s']:,.0f}", said(v["reminders"]["standard host"]),
                      said(v["reminders"]["host without support"])))
    widths = [max(len(line[i]) for line in [header, *lines] if len(line) == len(header) or i < 2)
              for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() if len(line) == len(header) else
            f"{line[0].ljust(widths[0])}  {line[1].ljust(widths[1])}  {line[2]}"
            for line in [header, tuple("-" * w for w in widths), *lines]]
