"""A stdio MCP host that behaves as Claude Code (>= 2.1.80) does on the channel contract.

    python -m tests.peers.claude_code_host [--calls JSON|@FILE] [--wait SECONDS] [--timeout SECONDS]
                                           [--server-name NAME] [--no-dev-channels] -- CMD ARGS

It spawns ``CMD ARGS`` as Claude Code spawns a server from `.mcp.json`, sends `initialize`
(protocolVersion 2025-11-25, capabilities ``{}``: it declares **no** reminder capability;
clientInfo claude-code 2.1.80) and `notifications/initialized`, then the calls (default:
`tools/list`, `tools/call touch_file {path: a.py}`, the same with `b.py`, `tools/call echo`; a
call `{"raw": LINE}` writes LINE as it is, as Claude Code writes a permission prompt to a channel),
waits ``--wait`` seconds for trailing notifications, closes the child's stdin and prints ONE
JSON report on stdout:

    {"initialize": {"result": …} | {"error": …}, "channel_listener": bool,
     "channel": [params of every notifications/claude/channel, in order],
     "rendered": [what the model sees for each of them, when a listener is registered],
     "notifications": [every other notification], "results": [{"method", "params", "result"|"error"|"timeout"}],
     "requests": [requests the server sent], "unparsed": [lines that were not JSON-RPC],
     "lines": [every line received, as text],
     "timeline": [{"kind", "method"?, "id"?}, in arrival order], "exit_code": int | null, …}

Like Claude Code, it registers a channel listener only when the server's `initialize` result
declares `capabilities.experimental["claude/channel"]` **and** the session was started with
``--dangerously-load-development-channels server:NAME`` (simulated: on unless
``--no-dev-channels``). Without a listener the events are still listed under ``channel`` (what
was sent) but ``rendered`` stays empty (what the model sees: nothing).

The child's stdout is read line by line with no line-length limit; lines that are not JSON,
batches, unknown methods and stray responses are recorded, never fatal. Server requests get
an answer (`ping` → ``{}``, anything else → -32601), as a host would give.
"""
from __future__ import annotations

import html
import json
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

CHANNEL_METHOD = "notifications/claude/channel"
CHANNEL_CAPABILITY = "claude/channel"
PROTOCOL_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "claude-code", "version": "2.1.80"}
#: what Claude Code keeps of a meta key: anything else is dropped without a word
ATTRIBUTE_KEY = re.compile(r"^[A-Za-z0-9_]+$")

DEFAULT_CALLS: list[dict[str, Any]] = [
    {"method": "tools/list"},
    {"method": "tools/call", "params": {"name": "touch_file", "arguments": {"path": "a.py"}}},
    {"method": "tools/call", "params": {"name": "touch_file", "arguments": {"path": "b.py"}}},
    {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "sync"}}},
]


# -- what the model sees ---------------------------------------------------------------------
def channel_attributes(server_name: str, params: Any) -> list[tuple[str, str]]:
    """The tag's attributes: Claude Code's own ``source`` (the server's configured name) first,
    then every `meta` entry whose key is an identifier, in wire order. A meta key named
    ``source`` is kept as a second ``source`` attribute (as observed of Claude Code; the docs
    only say `source` is set from the server's name). Non-string values are shown as JSON."""
    attrs = [("source", server_name)]
    meta = params.get("meta") if isinstance(params, Mapping) else None
    if isinstance(meta, Mapping):
        for key, value in meta.items():
            if isinstance(key, str) and ATTRIBUTE_KEY.match(key):
                attrs.append((key, value if isinstance(value, str) else json.dumps(value)))
    return attrs


def dropped_meta_keys(params: Any) -> list[str]:
    """The meta keys Claude Code would drop silently (not identifiers)."""
    meta = params.get("meta") if isinstance(params, Mapping) else None
    if not isinstance(meta, Mapping):
        return []
    return [str(k) for k in meta if not (isinstance(k, str) and ATTRIBUTE_KEY.match(k))]


def render_channel(server_name: str, params: Any) -> str:
    """One channel event as Claude Code shows it to the model:
    ``<channel source="SERVER-NAME" key="value" …>content</channel>``.

    Attribute values are escaped (``& < > " '``). The content is written as sent, except that a
    ``</channel`` inside it is written ``<\\/channel`` so a body cannot close the tag (Claude
    Code neutralises a closing tag in content the same way). This is a faithful model of the
    documented shape, not Claude Code's exact bytes (whitespace around the content may differ).
    """
    attrs = " ".join(f'{k}="{html.escape(v, quote=True)}"' for k, v in channel_attributes(server_name, params))
    content = params.get("content") if isinstance(params, Mapping) else None
    if not isinstance(content, str):
        content = "" if content is None else json.dumps(content)
    content = re.sub(r"</(channel)", r"<\\/\1", content, flags=re.IGNORECASE)
    return f"<channel {attrs}>{content}</channel>"


def declares_channel(initialize_result: Any) -> bool:
    caps = initialize_result.get("capabilities") if isinstance(initialize_result, Mapping) else None
    experimental = caps.get("experimental") if isinstance(caps, Mapping) else None
    return isinstance(experimental, Mapping) and CHANNEL_CAPABILITY in experimental


# -- the host --------------------------------------------------------------------------------
def _key(msg_id: Any) -> Any:
    """Ids compared as JSON values (`1` and `True` are not the same id; unhashable ids never match)."""
    return (type(msg_id).__name__, msg_id) if isinstance(msg_id, (int, str, float)) else ("other", repr(msg_id))


class _Child:
    """The spawned server: stdout lines arrive on a queue from a reader thread (no size limit)."""

    def __init__(self, argv: list[str], cwd: str | None, env: dict[str, str] | None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:  # readline on a binary pipe: any length
                self.lines.put(line.rstrip(b"\r\n"))
        finally:
            self.lines.put(None)

    def send(self, msg: dict[str, Any]) -> bool:
        return self.send_raw(json.dumps(msg).encode())

    def send_raw(self, line: bytes) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def close(self, timeout: float) -> int | None:
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class ClaudeCodeHost:
    def __init__(self, argv: list[str], *, server_name: str = "workspace", dev_channels: bool = True,
                 timeout: float = 10.0, cwd: str | None = None, env: dict[str, str] | None = None):
        self.server_name = server_name
        self.dev_channels = dev_channels
        self.timeout = timeout
        self.child = _Child(argv, cwd, env)
        self.eof = False
        self.next_id = 0
        self.report: dict[str, Any] = {
            "client_info": CLIENT_INFO, "server_name": server_name, "dev_channels": dev_channels,
            "initialize": None, "channel_listener": False, "channel": [], "rendered": [],
            "notifications": [], "results": [], "requests": [], "unparsed": [], "stray_responses": [],
            "timeline": [], "lines": [], "exit_code": None,
        }
        self._responses: dict[Any, dict[str, Any]] = {}
        self._outstanding: set[Any] = set()

    # frames -----------------------------------------------------------------------------
    def _take(self, line: bytes) -> None:
        if not line.strip():
            return
        self.report["lines"].append(line.decode("utf-8", errors="replace"))
        try:
            msg = json.loads(line)
        except ValueError:
            self._unparsed(line)
            return
        for item in msg if isinstance(msg, list) else [msg]:
            self._dispatch(item, line)

    def _unparsed(self, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace")
        self.report["unparsed"].append({"chars": len(text), "text": text[:2000]})
        self.report["timeline"].append({"kind": "unparsed"})

    def _dispatch(self, msg: Any, line: bytes) -> None:
        if not isinstance(msg, dict):
            self._unparsed(line)
            return
        method = msg.get("method")
        timeline = self.report["timeline"]
        if isinstance(method, str) and "id" in msg:
            self.report["requests"].append(msg)
            timeline.append({"kind": "request", "method": method, "id": msg["id"]})
            answer: dict[str, Any] = ({"result": {}} if method == "ping" else
                                      {"error": {"code": -32601, "message": f"Method not found: {method}"}})
            self.child.send({"jsonrpc": "2.0", "id": msg["id"], **answer})
        elif isinstance(method, str):
            if method == CHANNEL_METHOD:
                params = msg.get("params")
                self.report["channel"].append(params)
                if self.report["channel_listener"]:
                    self.report["rendered"].append(render_channel(self.server_name, params))
                timeline.append({"kind": "channel", "method": method})
            else:
                self.report["notifications"].append(msg)
                timeline.append({"kind": "notification", "method": method})
        elif "id" in msg and ("result" in msg or "error" in msg):
            timeline.append({"kind": "response", "id": msg["id"]})
            if _key(msg["id"]) in self._outstanding:
                self._outstanding.discard(_key(msg["id"]))
                self._responses[_key(msg["id"])] = msg
            else:  # an id this host never sent, answered twice, or answered after its timeout
                self.report["stray_responses"].append(msg)
        else:
            self._unparsed(line)

    def _pump(self, until: float, want: Any = None) -> dict[str, Any] | None:
        """Take frames until ``want`` is answered (returned) or the deadline passes."""
        while True:
            if want is not None and want in self._responses:
                return self._responses.pop(want)
            remaining = until - time.monotonic()
            if remaining <= 0 or self.eof:
                return None
            try:
                line = self.child.lines.get(timeout=remaining)
            except queue.Empty:
                return None
            if line is None:
                self.eof = True
                continue
            self._take(line)

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        msg_id = self.next_id
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self._outstanding.add(_key(msg_id))
        if not self.child.send(msg):
            self._outstanding.discard(_key(msg_id))
            return {"error": {"code": -32000, "message": "server closed its stdin"}}
        answer = self._pump(time.monotonic() + self.timeout, want=_key(msg_id))
        if answer is None:
            self._outstanding.discard(_key(msg_id))
            return {"timeout": True} if not self.eof else {"error": {"code": -32000, "message": "server exited"}}
        return {k: answer[k] for k in ("result", "error") if k in answer}

    # the session ------------------------------------------------------------------------
    def run(self, calls: list[dict[str, Any]], wait: float = 0.3) -> dict[str, Any]:
        init = self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                           "clientInfo": CLIENT_INFO})
        self.report["initialize"] = init
        self.report["channel_listener"] = self.dev_channels and declares_channel(init.get("result"))
        if "result" in init:
            self.child.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            for call in calls:
                if "raw" in call:  # a line written as it is (a notification, say): nothing to wait for
                    self.child.send_raw(call["raw"].encode())
                    continue
                method = call.get("method")
                params = call.get("params")
                answer = self.request(method, params)
                self.report["results"].append({"method": method, "params": params, **answer})
        self._pump(time.monotonic() + wait)
        self.report["exit_code"] = self.child.close(self.timeout)
        # what the server wrote while shutting down counts too; bounded, since a grandchild that
        # outlives a killed server can hold its stdout open
        self._pump(time.monotonic() + self.timeout)
        return self.report


def run_host(argv: list[str], calls: list[dict[str, Any]] | None = None, *, wait: float = 0.3,
             timeout: float = 10.0, server_name: str = "workspace", dev_channels: bool = True,
             cwd: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one session in-process (tests may also run the module as a program)."""
    host = ClaudeCodeHost(argv, server_name=server_name, dev_channels=dev_channels, timeout=timeout,
                          cwd=cwd, env=env)
    return host.run(DEFAULT_CALLS if calls is None else calls, wait=wait)


def _parse(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: python -m tests.peers.claude_code_host [options] -- CMD ARGS")
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1:]
    if not command:
        raise SystemExit("claude_code_host: no command after --")
    out: dict[str, Any] = {"calls": None, "wait": 0.3, "timeout": 10.0, "server_name": "workspace",
                           "dev_channels": True}
    i = 0
    while i < len(opts):
        opt = opts[i]
        if opt == "--no-dev-channels":
            out["dev_channels"] = False
            i += 1
            continue
        if opt not in ("--calls", "--wait", "--timeout", "--server-name") or i + 1 >= len(opts):
            raise SystemExit(f"claude_code_host: unknown or incomplete option {opt!r}")
        value = opts[i + 1]
        if opt == "--calls":
            text = open(value[1:], encoding="utf-8").read() if value.startswith("@") else value
            calls = json.loads(text)
            if not isinstance(calls, list) or not all(isinstance(c, dict) and ("method" in c or "raw" in c)
                                                      for c in calls):
                raise SystemExit("claude_code_host: --calls must be a JSON list of {method, params?} or {raw}")
            out["calls"] = calls
        elif opt == "--server-name":
            out["server_name"] = value
        else:
            out[opt[2:]] = float(value)
        i += 2
    return out, command


def main(argv: list[str] | None = None) -> int:
    opts, command = _parse(sys.argv[1:] if argv is None else argv)
    try:
        report = run_host(command, **opts)
    except OSError as exc:
        print(f"claude_code_host: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
