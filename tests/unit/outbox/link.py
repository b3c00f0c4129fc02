"""What the outbox tests share: one MCP connection through the sans-I/O flow (`Link`) with a
hand-driven clock, the route tables, and the frames they exchange."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from bridge.pipeline.commands import Defer, Wakeup, receipts_of
from tests.flows import make_flow
from bridge.pipeline.flow import OWN_ID_PREFIX
from bridge.pipeline.waiting import at_once
from bridge.transports.driver import run_blocking
from bridge.dialects.mcp import McpStandard
from bridge.outbox.events import parse_event, to_reminder
from bridge.outbox.pull import OutboxPull
from bridge.outbox.serving import OutboxServe
from bridge.rules import parse_rules_text
from bridge.state.scope import STDIO, Scope
from bridge.telemetry import Recorder

NOTE = "ai.nimblebrain/notification"

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"extensions": {"com.example/reminders": {}}},
          "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"}}


def event(event_id: str, name: str = "domain.active", **shown) -> dict:
    out = {"eventId": event_id, "name": name, "timestamp": "2026-09-01T18:42:10Z", "data": {"id": event_id}}
    if shown:
        out["_meta"] = {NOTE: shown}
    return out


class _Log:
    def __init__(self):
        self.lines: list[dict] = []

    def write(self, text):
        self.lines.append(json.loads(text))

    def flush(self):
        pass


def perform(commands, flow) -> list[tuple[str, dict]]:
    """What a transport does, without one: blocking work run at once, in order (a transport runs it
    on its background thread); what goes on a wire, decoded, and reported written."""
    out: list[tuple[str, dict]] = []
    for command in commands:
        if isinstance(command, Defer):
            out += perform(at_once(command.done(run_blocking(command))), flow)
        elif not isinstance(command, Wakeup):
            out.append((command.to, json.loads(command.data)))
            out += perform(flow.written(receipts_of([command])), flow)
    return out


class Link:
    """One MCP connection through the sans-I/O flow, with a hand-driven clock."""

    def __init__(self, tmp_path: Path, table: str = "", host_caps: dict | None = None, route_extra: str = "",
                 scope: Scope | None = None, beside: "Link | None" = None, **options):
        """``beside``: another connection of the same route (its recorder, so its store); ``options``:
        the flow's own (the book its scope's flows share, the outbox's owners)."""
        rules = (f'[routes.r]\nprotocol = "mcp"\n{route_extra}\n{table}\n')
        rules = rules.replace("STORE", str(tmp_path / "outbox.sqlite3"))
        self.log = beside.log if beside is not None else _Log()
        self.wall = 1_800_000_000.0
        self.now = 100.0
        recorder = beside.flow.recorder if beside is not None else Recorder(route="r", log=self.log)
        self.flow = make_flow("mcp", parse_rules_text(rules).routes["r"], recorder,
                              clock=lambda: self.now, scope=scope or Scope.connection("r", STDIO), **options)
        for half in self.flow.addons:
            half.wall = lambda: self.wall
        #: the outbox's halves, each None when the route has no such table
        self.pull = next((a for a in self.flow.addons if isinstance(a, OutboxPull)), None)
        self.serve = next((a for a in self.flow.addons if isinstance(a, OutboxServe)), None)
        self.host_caps = {"reminders": {}} if host_caps is None else host_caps

    def host(self, msg) -> list[tuple[str, dict]]:
        return perform(self.flow.from_host(json.dumps(msg).encode()), self.flow)

    def peer(self, msg) -> list[tuple[str, dict]]:
        return perform(self.flow.from_peer(json.dumps(msg).encode()), self.flow)

    def tick(self, seconds: float = 0.25) -> list[tuple[str, dict]]:
        """Time passes; the flow is woken (a transport would have woken it at its `Wakeup`)."""
        self.now += seconds
        return perform(self.flow.wake(self.now), self.flow)

    def legacy_handshake(self, server_caps: dict | None = None) -> list[tuple[str, dict]]:
        self.host({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": self.host_caps, "clientInfo": {"name": "h", "version": "1"}}})
        out = self.peer({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-11-25", "capabilities": server_caps or {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}}})
        assert self.tick() == []  # not before the handshake completed
        self.host({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return out

    def modern_handshake(self, server_caps: dict | None = None) -> list[tuple[str, dict]]:
        meta = {**MODERN, "io.modelcontextprotocol/clientCapabilities": self.host_caps}
        self.host({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
        return self.peer({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": server_caps or {"tools": {}},
            "ttlMs": 0, "cacheScope": "private"}})

    def answer(self, request: dict, events: list, cursor: str | None = "c1", **flags) -> list[tuple[str, dict]]:
        body = {"events": events, "cursor": cursor, **flags}
        if request["method"] == "events/poll":
            return self.peer({"jsonrpc": "2.0", "id": request["id"], "result": {"resultType": "complete", **body}})
        return self.peer({"jsonrpc": "2.0", "id": request["id"], "result": {"contents": [
            {"uri": request["params"]["uri"], "mimeType": "application/json", "text": json.dumps(body)}]}})


PULL = ('[routes.r.outbox]\nresource = "acme://n"\nstore = "STORE"\npoll_floor_ms = 1000\n'
        'poll_ceiling_ms = 10000\nmax_events = 50\nmax_age_ms = 3600000\n')

SERVE = '[routes.r.serve_outbox]\nresource = "bridge://reminders"\nstore = "STORE"\nretention_s = 3600\n'


def only_poll(out) -> dict:
    [(to, request)] = out
    assert to == "peer" and request["id"].startswith(OWN_ID_PREFIX)
    return request


def query(request) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(request["params"]["uri"]).query).items()}


def reminders(out) -> list[dict]:
    assert all(to == "host" for to, _ in out)
    return [m["params"]["reminder"] for _, m in out if m.get("method") == "notifications/reminder"]


def to_reminder_wire(source: str, raw: dict) -> dict:
    return McpStandard.encode(to_reminder(source, parse_event(raw)))["params"]["reminder"]


LEGACY_REMINDER = {"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "logger": "harn.reminder", "data": "b",
    "_meta": {"harn": {"reminder": {"id": "r1", "body": "Rebase first.\nThen push.", "dedupeKey": "k"}}}}}

HARN_CAPS = {"_meta": {"harn": {"reminders": {"emit": True}}}}


def push(link: Link, rid: str) -> list:
    msg = json.loads(json.dumps(LEGACY_REMINDER))
    msg["params"]["_meta"]["harn"]["reminder"]["id"] = rid
    return link.peer(msg)


def read(link: Link, uri: str, msg_id: int = 50) -> dict:
    [(to, response)] = link.host({"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": {"uri": uri}})
    assert to == "host"  # answered by the proxy, never sent to the server
    if "error" in response:
        return response
    return json.loads(response["result"]["contents"][0]["text"])


UNLISTENING = {**MODERN, "io.modelcontextprotocol/clientCapabilities": {}}  # a 2026-07-28 host without reminders
