"""`reminder-bridge demo`: a standard host talks to the bundled legacy peers through the proxy, and
Claude Code, with channels, to the legacy MCP server.

Everything runs in-process and uses the proxy's real pipelines (`bridge.assembly.make_flow`): a
scripted host sends JSON-RPC frames into `Flow.from_host`, what the flow sends to the peer is
handed to the example peer's `handle`, and the peer's replies go back through
`Flow.from_peer`.  No sockets, no subprocesses, stdlib-only peers.

Each message is printed as sent, then as the proxy delivered it (or "passed on unchanged" when
the bytes are identical, "dropped" when nothing was sent), then what changed, path by path, with
the reason where a rule gives one (`bridge.demo_view`). The JSON is laid out within the
terminal's width. The run ends with one summary per conversation, counting messages and
reminders apart, and exits 1 if an expected rewrite is missing, so the demo doubles as a smoke
test of a fresh install.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import sys
import textwrap
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from bridge.demo_view import Change, changes, layout
from bridge.examples.a2a_legacy_agent import LegacyA2AAgent
from bridge.examples.acp_harn_agent import HarnLikeAgent
from bridge.examples.mcp_legacy_server import LegacyMcpServer
from bridge.jsonrpc import dumps
from bridge.pipeline.commands import HOST, PEER, writes
from bridge.assembly import make_flow
from bridge.pipeline.flow import OWN_ID_PREFIX, Flow
from bridge.pipeline.waiting import at_once
from bridge.rules import RouteSettings
from bridge.telemetry import Recorder

MIN_WIDTH = 100  # when the terminal's width is unknown (a pipe)
SMALLEST_WIDTH = 60  # narrower, the labels and the nested JSON would not fit
INDENT = "    "  # where a message's JSON starts
PUBLIC_URL = "http://127.0.0.1:8080/a2a"
UPSTREAM_URL = "http://10.0.0.7:9000/a2a"
INTRO = (
    "reminder-bridge demo: a standard host talks to bundled legacy peers through the proxy's real pipelines, "
    "in-process.",
    "The legacy channel is Harn's: Harn, the agent runtime that introduced ambient reminders, carries them in "
    "metadata (_meta.harn on MCP and ACP, metadata.harn on A2A) and in ACP's session/remind; the proxy rewrites "
    "them to and from the proposed standard messages (notifications/reminder, session/inject_reminder, "
    "InjectTaskReminder).",
    "Each message is shown as sent, then as the proxy delivered it, then what changed, path by path: "
    "~ changed, + added, - removed, → moved or renamed. Strings too long for the width end in …",
)


# -- layout --------------------------------------------------------------------------------------
@dataclass
class Tally:
    messages: int = 0
    rewritten: int = 0
    unchanged: int = 0
    dropped: int = 0


def _decoded(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "backslashreplace")


class Printer:
    """One message as sent, what the proxy delivered for it, and what changed."""

    def __init__(self, out: TextIO, width: int):
        self.out = out
        self.width = width

    def line(self, text: str = "") -> None:
        self.out.write(text.rstrip() + "\n")

    def text(self, text: str, indent: str = "", then: str | None = None) -> None:
        """Prose, wrapped at spaces only (a method name or a path is never cut)."""
        for chunk in textwrap.wrap(text, self.width, initial_indent=indent, subsequent_indent=then or indent,
                                   break_long_words=False, break_on_hyphens=False):
            self.line(chunk)

    def heading(self, title: str, subtitle: str) -> None:
        self.line()
        self.line("━" * self.width)
        self.text(title)
        self.text(subtitle)
        self.line("━" * self.width)

    def json(self, value: Any, prefix: str) -> None:
        """``value`` laid out within the width, its first line after ``prefix``."""
        for n, chunk in enumerate(layout(value, self.width, len(prefix))):
            self.line(prefix + chunk if n == 0 else chunk)

    def message(self, label: str, value: Any) -> None:
        self.line(f"  {label}:")
        self.json(value, INDENT)

    def change(self, change: Change) -> None:
        """One change: on one line when it fits, else its values laid out below its head."""
        indent = INDENT + ("  " if change.within else "")
        if len(indent + change.text()) <= self.width or not change.values:
            self.text(change.text(), indent=indent, then=indent + "    ")
        else:
            self.text(change.head() + ":", indent=indent, then=indent + "    ")
            labels = ("was ", "now ") if change.mark == "~" else ("",)
            for label, value in zip(labels, change.values):
                self.json(value, indent + "    " + label)
        if change.why:
            self.text(f"({change.why})", indent=indent + "  ", then=indent + "   ")

    def exchange(self, label: str, note: str, sent: bytes, delivered: list[tuple[str, bytes]], natural: str,
                 own_answer: bool = False) -> str:
        """Print one message and what became of it; returns "unchanged", "rewritten" or "dropped".
        ``own_answer``: the message answers a request the proxy made itself, so what the proxy
        delivers is its own answer to the host, not this message rewritten."""
        self.line()
        self.text(f"▸ {label}", then="  ")
        if note:
            self.text(note, indent="  ")
        before = _decoded(sent)
        if not delivered:
            self.message("as sent, then dropped", before)
            return "dropped"
        if len(delivered) == 1 and delivered[0] == (natural, sent):
            self.message("as sent, passed on unchanged, byte for byte", before)
            return "unchanged"
        self.message("as sent", before)
        after = [(to, _decoded(data)) for to, data in delivered]
        # the delivered message that is this one rewritten: the one toward its side that changed least
        ours = [i for i, (to, value) in enumerate(after) if to == natural and not own_answer and not _own_request(value)]
        same = min(ours, key=lambda i: len(changes(before, after[i][1])), default=None)
        found = changes(before, after[same][1]) if same is not None else []
        for i, (to, value) in enumerate(after):
            if i == same and not found:
                self.line(f"  → to the {to}, unchanged (as sent)")
            else:
                self.message(_tag(to, value, natural, i == same, own_answer), value)
        if found:
            self.line("  what changed:")
            for change in found:
                self.change(change)
        return "rewritten"


def _own_request(msg: Any) -> bool:
    """A request the proxy makes itself (spec §8.6: its ids start `rb`), not one it passes on."""
    return isinstance(msg, dict) and "method" in msg and str(msg.get("id", "")).startswith(OWN_ID_PREFIX)


def _tag(to: str, msg: Any, natural: str, rewritten: bool, own_answer: bool = False) -> str:
    if own_answer:
        return f"→ to the {to}, the proxy's own answer"
    if to != natural:
        return f"↩ to the {to}, answered by the proxy"
    if _own_request(msg):
        return f"→ to the {to}, the proxy's own request"
    return f"→ delivered to the {to}, rewritten" if rewritten else f"→ to the {to}, added by the proxy"


def _summary(msg: Any) -> str:
    """A short name for a message: its method, or what kind of response it is."""
    if not isinstance(msg, dict):
        return "message"
    if "method" in msg:
        update = msg.get("params", {}).get("update") if isinstance(msg.get("params"), dict) else None
        if isinstance(update, dict) and "sessionUpdate" in update:
            return f"{msg['method']} ({update['sessionUpdate']})"
        return str(msg["method"])
    if "error" in msg:
        return f"error for #{msg.get('id')}"
    result = msg.get("result")
    kind = next((k for k in ("task", "statusUpdate", "artifactUpdate", "message", "reminderUpdate")
                 if isinstance(result, dict) and k in result), None)
    return f"result #{msg.get('id')}" + (f" ({kind} frame)" if kind else "")


# -- one conversation ----------------------------------------------------------------------------
@dataclass
class Conversation:
    """A scripted host, the proxy's flow and an in-process peer, with everything printed."""

    name: str
    flow: Flow
    peer: Callable[[dict[str, Any]], list[dict[str, Any]]]
    printer: Printer
    tally: Tally = field(default_factory=Tally)
    to_host: list[dict[str, Any]] = field(default_factory=list)
    to_peer: list[dict[str, Any]] = field(default_factory=list)

    def host_sends(self, msg: dict[str, Any], note: str = "") -> list[dict[str, Any]]:
        """Send one host message through the proxy; returns what the host received meanwhile."""
        start = len(self.to_host)
        pending: deque[tuple[str, bytes, str]] = deque([(HOST, dumps(msg), note)])
        while pending:
            origin, frame, why = pending.popleft()
            sends = at_once(self.flow.from_host(frame) if origin == HOST else self.flow.from_peer(frame))
            natural = PEER if origin == HOST else HOST
            delivered = [(s.to, s.data) for s in writes(sends)]
            self._show(origin, frame, why, delivered, natural)
            for to, data in delivered:
                decoded = json.loads(data)
                if to == HOST:
                    self.to_host.append(decoded)
                    continue
                self.to_peer.append(decoded)
                for reply in self.peer(decoded):
                    pending.append((PEER, dumps(reply), ""))
        return self.to_host[start:]

    def peer_document(self, label: str, note: str, original: dict[str, Any],
                      rewritten: dict[str, Any] | None) -> None:
        """A non-JSON-RPC document the proxy rewrites on its way to the host (the A2A agent card)."""
        sent = dumps(original)
        delivered = [(HOST, dumps(rewritten) if rewritten is not None else sent)]
        self._count(self.printer.exchange(label, note, sent, delivered, HOST))

    def _show(self, origin: str, frame: bytes, note: str, delivered: list[tuple[str, bytes]], natural: str) -> None:
        msg = json.loads(frame)
        if origin == HOST:
            direction = "host → peer"
        elif isinstance(msg, dict) and "method" not in msg and str(msg.get("id", "")).startswith(OWN_ID_PREFIX):
            direction = "peer → proxy"  # the answer to a request the proxy made itself
        else:
            direction = "peer → host"
        self._count(self.printer.exchange(f"{direction}  {_summary(msg)}", note, frame, delivered, natural,
                                          own_answer=direction == "peer → proxy"))

    def _count(self, outcome: str) -> None:
        self.tally.messages += 1
        setattr(self.tally, outcome, getattr(self.tally, outcome) + 1)


# -- the scripts ---------------------------------------------------------------------------------
def _rpc(msg_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def _methods(received: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("method")) for m in received if "method" in m]


def _result(received: list[dict[str, Any]], msg_id: Any) -> Any:
    for m in received:
        if m.get("id") == msg_id and "method" not in m:
            return m.get("result")
    return None


def mcp_script(c: Conversation) -> list[str]:
    """Returns the expectations that were not met (empty when the proxy did its job)."""
    missing: list[str] = []
    got = c.host_sends(_rpc(1, "initialize", {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {}, "reminders": {}},
        "clientInfo": {"name": "standard-host", "version": "1.0.0"},
    }), "the host declares capabilities.reminders (standard)")
    caps = (_result(got, 1) or {}).get("capabilities", {})
    if "reminders" not in caps or "harn" in caps.get("_meta", {}):
        missing.append("initialize result with capabilities.reminders")
    c.host_sends({"jsonrpc": "2.0", "method": "notifications/initialized"})
    got = c.host_sends(_rpc(2, "tools/call", {"name": "touch_file", "arguments": {"path": "src/app.py"}}),
                       "the legacy server reports the change as a harn.reminder log message")
    if "notifications/reminder" not in _methods(got):
        missing.append("notifications/reminder")
    if not any(m.get("method") == "notifications/message" and m["params"].get("logger") == "fs" for m in got):
        missing.append("the ordinary log message")
    if _result(got, 2) is None:
        missing.append("the tools/call result")
    return missing


def channel_script(c: Conversation) -> list[str]:
    """Claude Code with channels (spec §11): the reminder is pushed into the session, the tool result
    goes on as the server sent it."""
    missing: list[str] = []
    got = c.host_sends(_rpc(1, "initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "2.1.80"},
    }), 'Claude Code declares no reminder support; the route says host_dialect = "claude-channel"')
    result = _result(got, 1) or {}
    if "claude/channel" not in (result.get("capabilities") or {}).get("experimental", {}) \
            or "ambient reminders" not in str(result.get("instructions")):
        missing.append("initialize result with the claude/channel capability and instructions")
    c.host_sends({"jsonrpc": "2.0", "method": "notifications/initialized"})
    got = c.host_sends(_rpc(2, "tools/call", {"name": "touch_file", "arguments": {"path": "src/app.py"}}),
                       "the reminder becomes one channel event; Claude Code shows it to the model at once as "
                       '<channel source="workspace" reminder_id=… …>body</channel>')
    events = [m for m in got if m.get("method") == "notifications/claude/channel"]
    if len(events) != 1 or "src/app.py changed" not in str(events[0]["params"].get("content")):
        missing.append("one notifications/claude/channel")
    content = (_result(got, 2) or {}).get("content")
    if not isinstance(content, list) or len(content) != 1:
        missing.append("the tools/call result as the server sent it")
    return missing


def acp_script(c: Conversation) -> list[str]:
    missing: list[str] = []
    got = c.host_sends(_rpc(0, "initialize", {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True,
                               "reminders": {"emit": True}},
        "clientInfo": {"name": "standard-editor", "version": "1.0.0"},
    }), "the client declares clientCapabilities.reminders (standard)")
    if "reminders" not in ((_result(got, 0) or {}).get("agentCapabilities") or {}):
        missing.append("agentCapabilities.reminders")
    got = c.host_sends(_rpc(1, "session/new", {"cwd": "/home/dev/shop", "mcpServers": []}))
    session_id = (_result(got, 1) or {}).get("sessionId", "sess-1")
    c.host_sends(_rpc(2, "session/inject_reminder", {
        "sessionId": session_id,
        "body": "CI is red on main: do not merge until it is green.",
        "tags": ["ci"],
        "dedupeKey": "ci:main",
        "ttlTurns": 1,
    }), "standard inject without a mode: Harn would read a missing mode as audit_only")
    if not any(m.get("method") == "session/remind" and m["params"].get("mode") == "finish_step"
               and "dedupe_key" in m["params"] for m in c.to_peer):
        missing.append("session/remind with snake_case keys and mode finish_step")
    got = c.host_sends(_rpc(3, "session/prompt", {
        "sessionId": session_id, "prompt": [{"type": "text", "text": "Merge PR #12 into main."}],
    }), "the agent renders the reminder and reports it Harn's way")
    emitted = [m["params"]["update"] for m in got if m.get("method") == "session/update"
               and m["params"]["update"].get("sessionUpdate") == "reminder_emitted"]
    if not any("body" in u and "harn" not in (u.get("_meta") or {}) for u in emitted):
        missing.append("reminder_emitted in the standard flat form")
    return missing


def a2a_script(c: Conversation, agent: LegacyA2AAgent) -> list[str]:
    missing: list[str] = []
    card = agent.agent_card(UPSTREAM_URL)
    rewritten = c.flow.rewrite_card(card)  # type: ignore[attr-defined]
    c.peer_document("peer → host  GET /.well-known/agent-card.json", f"capability and URL now point at the proxy "
                    f"({PUBLIC_URL})", card, rewritten)
    if not rewritten or "reminders" not in rewritten.get("capabilities", {}):
        missing.append("agent card with capabilities.reminders")
    got = c.host_sends(_rpc("req-1", "SendStreamingMessage", {
        "message": {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": "Rebase feature/checkout on main."}]},
    }), "each reply below is one SSE frame (data: = the JSON-RPC response)")
    task_id = next((m["result"]["task"]["id"] for m in got if isinstance(m.get("result"), dict)
                    and isinstance(m["result"].get("task"), dict)), "task-1")
    kinds = [next(iter(m["result"]), None) for m in got if isinstance(m.get("result"), dict)]
    if "reminderUpdate" not in kinds or kinds.index("reminderUpdate") + 1 >= len(kinds) \
            or kinds[kinds.index("reminderUpdate") + 1] != "statusUpdate":
        missing.append("a reminderUpdate frame followed by the cleaned event")
    reminder = {"body": "main was force-pushed at 14:02; rebase again before pushing.",
                "tags": ["git"], "dedupeKey": "main-moved", "ttlTurns": 1}
    got = c.host_sends(_rpc("req-2", "InjectTaskReminder", {"taskId": task_id, "reminder": reminder}),
                       "the task waits for its go-ahead (input-required); the legacy agent has no such method: "
                       "the proxy checks the task, queues and answers")
    if not isinstance(_result(got, "req-2"), dict):
        missing.append("the proxy's InjectTaskReminder answer")
    c.host_sends(_rpc("req-3", "SendMessage", {
        "message": {"messageId": "msg-2", "taskId": task_id, "role": "ROLE_USER",
                    "parts": [{"text": "Push the rebased branch."}]},
    }), "the queued reminder rides along as metadata.harn.reminder; this turn completes the task")
    if not agent.received_reminders.get(task_id):
        missing.append("the reminder delivered to the legacy agent")
    got = c.host_sends(_rpc("req-4", "InjectTaskReminder", {"taskId": task_id, "reminder": reminder}),
                       "a completed task takes no further message, so the proxy refuses the inject and queues nothing")
    refusal = next((m.get("error") for m in got if m.get("id") == "req-4"), None)
    if not isinstance(refusal, dict) or refusal.get("code") != -32004:
        missing.append("the refusal of an inject for a completed task")
    return missing


# -- entry point ---------------------------------------------------------------------------------
def _width(width: int) -> int:
    """The columns to lay out in: the one asked for, else the terminal's (100 when it is not one)."""
    columns = width if width > 0 else shutil.get_terminal_size((MIN_WIDTH, 24)).columns
    return max(columns, SMALLEST_WIDTH)


class Reminders:
    """What the proxy decided for each reminder, in order, by reminder id (a Recorder listener)."""

    def __init__(self) -> None:
        self.decided: dict[str, list[str]] = {}

    def decision(self, record: dict[str, Any]) -> None:
        if record["reminder"] is not None:
            self.decided.setdefault(record["reminder"].id, []).append(record["action"])

    def handshake(self, record: dict[str, Any]) -> None:
        pass

    def summary(self) -> str:
        """`3 reminders: 1 rewritten; 1 queued, then attached to the next message; 1 refused`."""
        paths = Counter(_story(actions) for actions in self.decided.values())
        count = len(self.decided)
        return (f"{count} reminder{'' if count == 1 else 's'}: " + "; ".join(f"{n} {path}" for path, n in paths.items())
                if count else "no reminder")


#: what a decision (the `action` label of reminder_bridge_reminders_total) did, in words
ACTION_WORDS = {"channel": "sent as a channel event", "attached": "attached to the next message",
                "rendered": "rendered into the next prompt", "synthesized": "its lifecycle told the client",
                "passed": "passed on as it was", "rate_limited": "held back by the budget"}


def _story(actions: list[str]) -> str:
    """One reminder's decisions in order, repeats counted: `rewritten twice`, `queued, then attached…`."""
    runs: list[list[Any]] = []
    for action in actions:
        if runs and runs[-1][0] == action:
            runs[-1][1] += 1
        else:
            runs.append([action, 1])
    told = [ACTION_WORDS.get(a, a) + {1: "", 2: " twice"}.get(n, f" {n} times") for a, n in runs]
    return ", then ".join(told)


def run_demo(width: int = 0, out: TextIO | None = None) -> int:
    """Run the four conversations and print them; 0 when every expected rewrite happened."""
    out = out if out is not None else sys.stdout
    if hasattr(out, "reconfigure"):
        try:
            out.reconfigure(errors="replace")  # type: ignore[union-attr]  # box-drawing on a non-UTF-8 console
        except (ValueError, OSError):
            pass
    try:
        return _run(Printer(out, _width(width)))
    except BrokenPipeError:  # `reminder-bridge demo | head`: the reader has seen enough
        try:  # keep the interpreter's final flush of stdout from failing too
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


def _conversation(name: str, flow: Flow, peer: Callable[[dict[str, Any]], list[dict[str, Any]]],
                  printer: Printer) -> tuple[Conversation, Reminders]:
    """A conversation whose flow's reminder decisions are collected apart from any other's."""
    reminders = Reminders()
    flow.recorder.listeners.append(reminders)
    return Conversation(name, flow, peer, printer), reminders


def _run(printer: Printer) -> int:
    log = io.StringIO()  # decisions are logged here, not on stderr
    settings = RouteSettings()

    for paragraph in INTRO:
        printer.text(paragraph)

    def recorder(route: str) -> Recorder:
        return Recorder(route=route, log=log)

    results: list[tuple[Conversation, Reminders, list[str]]] = []
    printer.heading("MCP  standard host ↔ legacy server (bridge.examples.mcp_legacy_server)",
                    "Reminders flow toward the host; the server speaks notifications/message + _meta.harn.reminder.")
    mcp, seen = _conversation("MCP", make_flow("mcp", settings, recorder("demo")), LegacyMcpServer().handle, printer)
    results.append((mcp, seen, mcp_script(mcp)))

    printer.heading("MCP  Claude Code with channels ↔ legacy server (reminder-bridge stdio --route workspace "
                    "--host-dialect claude-channel)",
                    "Each reminder is pushed into the running session as notifications/claude/channel; "
                    "Claude Code must be launched with --dangerously-load-development-channels server:workspace.")
    channel, seen = _conversation("Claude Code", make_flow("mcp", settings, recorder("workspace"),
                                                           host_dialect="claude-channel"),
                                  LegacyMcpServer().handle, printer)
    results.append((channel, seen, channel_script(channel)))

    printer.heading("ACP  standard client ↔ Harn-like agent (bridge.examples.acp_harn_agent)",
                    "The agent takes session/remind with snake_case keys and reports reminders under "
                    "_meta.harn.reminder.")
    acp, seen = _conversation("ACP", make_flow("acp", settings, recorder("demo")), HarnLikeAgent().handle, printer)
    results.append((acp, seen, acp_script(acp)))

    printer.heading("A2A  standard caller ↔ legacy remote agent (bridge.examples.a2a_legacy_agent)",
                    "The agent carries reminders as metadata.harn.reminder on messages and stream events.")
    agent = LegacyA2AAgent()
    a2a, seen = _conversation("A2A", make_flow("a2a", settings, recorder("demo"), host_dialect="standard",
                                               peer_dialect="legacy", public_url=PUBLIC_URL), agent.handle, printer)
    results.append((a2a, seen, a2a_script(a2a, agent)))

    printer.line()
    printer.line("━" * printer.width)
    failed = False
    name_width = max(len(conv.name) for conv, _, _ in results) + 2
    for conv, reminders, missing in results:
        t = conv.tally
        failed = failed or bool(missing)
        printer.text(f"{conv.name.ljust(name_width)}{t.messages} messages: {t.rewritten} rewritten, "
                     f"{t.unchanged} passed unchanged, {t.dropped} dropped", then=" " * name_width)
        printer.text(" " * name_width + reminders.summary(), then=" " * name_width)
        printer.text(" " * name_width + ("ok" if not missing else "MISSING: " + "; ".join(missing)),
                     then=" " * name_width)
    printer.out.flush()
    return 1 if failed else 0
