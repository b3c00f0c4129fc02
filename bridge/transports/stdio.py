"""`reminder-bridge stdio -- COMMAND`: wrap an MCP server or ACP agent that a host launches.

The host talks to us exactly as it talked to the child: newline-delimited JSON-RPC on stdin and
stdout.  Bytes are read in chunks and split on newlines ourselves (no 64 KiB line limit), each
frame goes through the pipeline, and every write is awaited (`drain`) so a side that stops
reading slows the other down instead of growing buffers.  The child's stderr is inherited: it
reaches the host unbuffered and untouched.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import stat
import sys
from typing import Any

from bridge.pipeline import HOST, PEER, Flow, dumps, error_response
from bridge.rules import RouteSettings, RulesError, load_rules
from bridge.telemetry import Recorder

CHUNK = 256 * 1024
MAX_LINE = 64 * 1024 * 1024
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


class LineSplitter:
    """Splits a byte stream into frames without a line-length ceiling below ``max_line``.

    A longer line fails only itself: its bytes are discarded as they arrive (memory stays
    bounded) and `oversize` reports its first bytes so a request can still be answered.
    """

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self._partial = bytearray()
        self._discarding: bytes | None = None  # head of an oversize line being skipped

    def feed(self, chunk: bytes) -> tuple[list[bytes], list[bytes]]:
        """Complete frames in ``chunk``, and the heads of oversize lines that ended in it."""
        frames: list[bytes] = []
        oversize: list[bytes] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            piece = chunk[start:end]
            if self._discarding is not None:
                oversize.append(self._discarding)
                self._discarding = None
            elif self._partial:
                if len(self._partial) + len(piece) > self.max_line:
                    oversize.append(bytes(self._partial[:4096]))
                else:
                    self._partial += piece
                    frames.append(bytes(self._partial))
                self._partial.clear()
            else:
                if len(piece) > self.max_line:
                    oversize.append(piece[:4096])
                else:
                    frames.append(piece)
            start = end + 1
        rest = chunk[start:]
        if rest:
            if self._discarding is None:
                if len(self._partial) + len(rest) > self.max_line:
                    self._discarding = bytes((self._partial + rest)[:4096])
                    self._partial.clear()
                else:
                    self._partial += rest
        return frames, oversize

    def flush(self) -> bytes | None:
        """Whatever was left without a final newline at EOF."""
        if self._partial:
            data = bytes(self._partial)
            self._partial.clear()
            return data
        return None


def oversize_reply(head: bytes, limit: int) -> bytes | None:
    """A JSON-RPC error for an oversize request, if its id can be read from its first bytes."""
    if b'"method"' not in head:
        return None
    match = _ID.search(head)
    if match is None:
        return None
    msg_id = json.loads(match.group(1))
    return dumps(error_response(msg_id, -32600, f"message larger than the proxy's line limit of {limit} bytes",
                                {"limit": limit}))


def detect_protocol(frame: bytes) -> str:
    """MCP or ACP, from the host's first message: ACP's `initialize` carries an integer version."""
    try:
        msg = json.loads(frame)
    except (ValueError, RecursionError):
        return "mcp"
    params = msg.get("params") if isinstance(msg, dict) else None
    if isinstance(params, dict) and msg.get("method") == "initialize":
        if isinstance(params.get("protocolVersion"), int) or "clientCapabilities" in params:
            return "acp"
    return "mcp"


def _is_stream(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _FileInput:
    """A regular file on stdin (`< input.jsonl`): asyncio pipes refuse those, so read in a thread."""

    def __init__(self, fd: int):
        self.fd = fd

    async def read(self, n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, os.read, self.fd, n)


async def open_input(fd: int) -> Any:
    """Something with `await read(n)` over ``fd``, non-blocking where the kernel allows."""
    if not _is_stream(fd):
        return _FileInput(fd)
    reader = asyncio.StreamReader(limit=CHUNK)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                       os.fdopen(fd, "rb", 0, closefd=False))
    return reader


class Output:
    """`await write(data)` that returns once the data is handed on (backpressure), for pipes and files."""

    def __init__(self, fd: int, writer: asyncio.StreamWriter | None):
        self.fd = fd
        self.writer = writer

    async def write(self, data: bytes) -> None:
        if self.writer is not None:
            self.writer.write(data)
            await self.writer.drain()
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


async def open_output(fd: int) -> Output:
    if not _is_stream(fd):
        return Output(fd, None)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(fd, "wb", 0, closefd=False))
    return Output(fd, asyncio.StreamWriter(transport, protocol, None, loop))


class StdioProxy:
    """Relays between our stdin/stdout (the host) and a child process (the peer)."""

    def __init__(self, command: list[str], settings: RouteSettings, protocol: str | None,
                 recorder: Recorder, host_dialect: str | None = None, peer_dialect: str | None = None,
                 max_line: int = MAX_LINE):
        self.command = command
        self.settings = settings
        self.protocol = protocol
        self.recorder = recorder
        self.dialects = {"host_dialect": host_dialect, "peer_dialect": peer_dialect}
        self.max_line = max_line
        self.flow: Flow | None = None
        self.child: asyncio.subprocess.Process | None = None
        self._host_out: Output | None = None
        self._write_lock = asyncio.Lock()

    def _make_flow(self, first_frame: bytes) -> Flow:
        from bridge.cli import make_flow

        protocol = self.protocol or detect_protocol(first_frame)
        return make_flow(protocol, self.settings, self.recorder, **self.dialects)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        try:
            self.child = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
                limit=CHUNK)
        except OSError as exc:
            sys.stderr.write(f"reminder-bridge: cannot start {self.command[0]!r}: {exc.strerror or exc}\n")
            return 127 if isinstance(exc, FileNotFoundError) else 126
        self.recorder.info("child_started", pid=self.child.pid, command=self.command[0])
        host_in = await open_input(0)
        self._host_out = await open_output(1)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._forward_signal, sig)
        to_child = asyncio.create_task(self._pump_host(host_in))
        try:
            await self._pump_child()
            code = await self.child.wait()
        finally:
            to_child.cancel()
            await asyncio.gather(to_child, return_exceptions=True)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        self.recorder.info("child_exited", code=code)
        return code if code >= 0 else 128 - code

    def _forward_signal(self, sig: int) -> None:
        if self.child is not None and self.child.returncode is None:
            self.child.send_signal(sig)

    async def _pump_host(self, reader: Any) -> None:
        """Host → child. On EOF, close the child's stdin: that is how MCP and ACP hosts say goodbye."""
        assert self.child is not None and self.child.stdin is not None
        splitter = LineSplitter(self.max_line)
        try:
            while chunk := await reader.read(CHUNK):
                frames, oversize = splitter.feed(chunk)
                await self._route(frames, oversize, from_host=True)
            tail = splitter.flush()
            if tail is not None:
                await self._route([tail], [], from_host=True, newline=False)
        except (ConnectionResetError, BrokenPipeError):
            pass
        finally:
            if self.child.stdin is not None and not self.child.stdin.is_closing():
                self.child.stdin.close()

    async def _pump_child(self) -> None:
        """Child → host, until the child closes its stdout."""
        assert self.child is not None and self.child.stdout is not None
        splitter = LineSplitter(self.max_line)
        reader = self.child.stdout
        while chunk := await reader.read(CHUNK):
            frames, oversize = splitter.feed(chunk)
            await self._route(frames, oversize, from_host=False)
        tail = splitter.flush()
        if tail is not None:
            await self._route([tail], [], from_host=False, newline=False)

    async def _route(self, frames: list[bytes], oversize: list[bytes], from_host: bool, newline: bool = True) -> None:
        to_host: list[bytes] = []
        to_peer: list[bytes] = []
        for frame in frames:
            if self.flow is None:
                if not frame.strip():
                    (to_peer if from_host else to_host).append(frame)
                    continue
                self.flow = self._make_flow(frame)
            sends = self.flow.from_host(frame) if from_host else self.flow.from_peer(frame)
            for send in sends:
                (to_host if send.to == HOST else to_peer).append(send.data)
        for head in oversize:
            reply = oversize_reply(head, self.max_line) if from_host else None
            self.recorder.log("oversize", side=HOST if from_host else PEER, limit=self.max_line,
                              answered=reply is not None)
            if reply is not None:
                to_host.append(reply)
        end = b"\n" if newline else b""
        if to_peer:
            await self._write_peer(to_peer, end)
        if to_host:
            await self._write_host(to_host, end)

    async def _write_peer(self, lines: list[bytes], end: bytes) -> None:
        assert self.child is not None and self.child.stdin is not None
        stdin = self.child.stdin
        if stdin.is_closing():
            return
        try:
            stdin.write(b"\n".join(lines) + end)
            await stdin.drain()
        except (ConnectionResetError, BrokenPipeError):
            pass  # the child is gone; its exit ends the proxy

    async def _write_host(self, lines: list[bytes], end: bytes) -> None:
        assert self._host_out is not None
        async with self._write_lock:  # both pumps may answer the host; keep lines whole
            try:
                await self._host_out.write(b"\n".join(lines) + end)
            except (ConnectionResetError, BrokenPipeError):
                pass


def add_stdio_parser(sub: Any) -> None:
    p = sub.add_parser("stdio", help="wrap an MCP server or ACP agent command: reminder-bridge stdio -- CMD ARGS")
    p.add_argument("--rules", help="rules file (TOML); default: built-in defaults")
    p.add_argument("--route", help="route name in the rules file")
    p.add_argument("--protocol", choices=("mcp", "acp"), help="default: the route's, else detected from initialize")
    p.add_argument("--host-dialect", choices=("auto", "standard", "legacy", "none"))
    p.add_argument("--peer-dialect", choices=("auto", "standard", "legacy", "none"))
    p.add_argument("--admin", metavar="HOST:PORT", help="serve /healthz, /readyz and /metrics here")
    p.add_argument("--max-line", type=int, default=MAX_LINE, help=argparse.SUPPRESS)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    p.set_defaults(func=_cmd_stdio)


def _cmd_stdio(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.stderr.write("reminder-bridge stdio: no command given (usage: reminder-bridge stdio [options] -- CMD ARGS)\n")
        return 2
    settings = RouteSettings()
    route_name = args.route or "default"
    if args.rules:
        try:
            rules = load_rules(args.rules)
        except RulesError as exc:
            sys.stderr.write(f"reminder-bridge: {args.rules} has problems:\n{exc}\n")
            return 2
        try:
            settings = rules.route(args.route) if args.route else _only_route(rules)
        except KeyError as exc:
            sys.stderr.write(f"reminder-bridge: {exc.args[0]}\n")
            return 2
    protocol = args.protocol or getattr(settings, "protocol", None)
    recorder = Recorder(route=route_name)
    proxy = StdioProxy(command, settings, protocol, recorder, args.host_dialect, args.peer_dialect, args.max_line)
    return asyncio.run(_serve(proxy, args.admin))


def _only_route(rules: Any) -> RouteSettings:
    routes = [r for r in rules.routes.values() if r.protocol in (None, "mcp", "acp")]
    if len(routes) == 1:
        return routes[0]
    if not routes:
        return rules.defaults
    raise KeyError(f"the rules file has several routes; name one with --route ({', '.join(rules.routes)})")


async def _serve(proxy: StdioProxy, admin: str | None) -> int:
    runner = None
    if admin:
        from bridge.admin import start_admin

        runner = await start_admin(admin, proxy.recorder, ready=lambda: proxy.child is not None
                                   and proxy.child.returncode is None)
    try:
        return await proxy.run()
    finally:
        if runner is not None:
            await runner.cleanup()
