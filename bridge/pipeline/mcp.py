"""MCP host ↔ server (SPEC §3): reminders flow toward the host only."""
from __future__ import annotations

import copy
from typing import Any

from bridge.dialects.mcp import CODECS, McpLegacy, McpStandard
from bridge.dialects.paths import get_path, pop_path
from bridge.envelope import render
from bridge.model import Reminder, ReminderError
from bridge.outbox.bridge import OutboxBridge
from bridge.pipeline import HOST, PEER, Flow, Outgoing

MODERN_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"


class McpFlow(Flow):
    """One MCP connection.

    ``peer_declared`` is what the server's handshake said about reminders; None until seen.
    The `translate` command, which sees no handshake, passes True (the user named the dialect).
    """

    protocol = "mcp"

    def __init__(self, *args: Any, peer_declared: bool | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.peer_declared = peer_declared
        self.modern = False
        self.opted_in: set[Any] = set()  # in-flight modern requests that asked for log messages
        self.pending: list[Reminder] = []  # for the host-`none` tool_result fallback
        self.handshake_seen = False
        self.peer_markers = (b"emind",)
        self.outbox = OutboxBridge.for_flow(self)  # outbox polling / serving (bridge/outbox), if configured
        self._watch_host()

    def _watch_host(self) -> None:
        """Host frames worth parsing: handshakes until one is seen, log opt-ins when they matter,
        and tool calls only while tool results may carry reminders."""
        markers = [b"emind"]
        if not self.handshake_seen or self.host_dialect == "auto":
            markers += [b"initialize", b"discover", b"io.modelcontextprotocol"]
        if self.host_dialect == "legacy":
            markers.append(b"logLevel")
        if self._tool_results_carry_reminders():
            markers.append(b"tools")
        if self.outbox is not None:
            markers += self.outbox.host_markers()
        self.host_markers = tuple(markers)

    # -- outbox delegation (bridge/outbox/bridge.py) -----------------------------------------
    def on_host(self, msg: dict[str, Any]) -> Outgoing | None:
        return self._on_host(msg) if self.outbox is None else self.outbox.on_host(msg, self._on_host)

    def on_peer(self, msg: dict[str, Any]) -> Outgoing | None:
        return self._on_peer(msg) if self.outbox is None else self.outbox.on_peer(msg, self._on_peer)

    def on_tick(self, now: float) -> Outgoing | None:
        return None if self.outbox is None else self.outbox.on_tick(now)

    # -- host → server -------------------------------------------------------------------------
    def _on_host(self, msg: dict[str, Any]) -> Outgoing | None:
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method == "initialize":
            self._learn_host(params.get("capabilities"), params.get("clientInfo"))
            self.expect_response(HOST, msg, "handshake")
        elif method == "server/discover":
            self.modern = True
            self._watch_host()
            self._learn_host(meta.get(CLIENT_CAPS_KEY))
            self.expect_response(HOST, msg, "handshake")
        elif MODERN_KEY in meta and not (self.modern and self.handshake_seen):
            self.modern = True  # 2026-07-28 without a discover probe: every request carries the envelope
            self._learn_host(meta.get(CLIENT_CAPS_KEY))
        if LOG_LEVEL_KEY in meta and "id" in msg:
            self.opted_in.add(msg["id"])
            self.expect_response(HOST, msg, "call")
        if method == "tools/call" and self._tool_results_carry_reminders():
            self.expect_response(HOST, msg, "tool")
        return None

    def _learn_host(self, caps: Any, client_info: Any = None) -> None:
        self.handshake_seen = True
        declared = "standard" if McpStandard.host_declares(caps) else "legacy" if McpLegacy.host_declares(caps) \
            else "none"
        if caps is not None or client_info is not None:
            name = client_info.get("name") if isinstance(client_info, dict) else None
            self.recorder.handshake("host", declared, protocol=self.protocol,
                                    client=name if isinstance(name, str) else None)
        if self.host_fixed or (self.host_dialect != "auto" and caps is None):
            self._watch_host()
            return
        self.host_dialect = declared
        self._watch_host()

    # -- server → host -------------------------------------------------------------------------
    def _on_peer(self, msg: dict[str, Any]) -> Outgoing | None:
        waited = self.response_to(HOST, msg)
        if waited is not None:
            self.opted_in.discard(msg.get("id"))
            if waited == "tool" and self.pending:
                return self._append_to_tool_result(msg)
        if waited == "handshake" or (waited is None and _is_handshake_result(msg)):
            return self._handshake_result(msg)
        if waited is not None:
            return None
        for codec in (McpStandard, McpLegacy):
            if codec.is_reminder(msg):
                return self._reminder(msg, codec)
        return None

    def _handshake_result(self, msg: dict[str, Any]) -> Outgoing | None:
        caps = get_path(msg, "result", "capabilities")
        if not isinstance(caps, dict):
            return None
        declared = {name: codec.read_capability(caps) for name, codec in CODECS.items()}
        self.peer_declared = any(cap is not None for cap in declared.values())
        info = get_path(msg, "result", "serverInfo")
        self.recorder.handshake("peer", next((n for n, c in declared.items() if c is not None), "none"),
                                protocol=self.protocol, client=info.get("name") if isinstance(info, dict) else None)
        if not self.peer_fixed:
            self.peer_dialect = next((n for n, c in declared.items() if c is not None), "none")
        target = self.host_dialect
        cap = declared.get(self.peer_dialect) or next((c for c in declared.values() if c is not None), None)
        if target not in CODECS or cap is None or declared.get(target) == cap:
            return None
        out = copy.deepcopy(msg)
        out_caps = out["result"]["capabilities"]
        for name, codec in CODECS.items():
            codec.write_capability(out_caps, cap if name == target else None)
        self.record("rewritten", "initialize", source=self.peer_dialect, target=target, why=None)
        return [(HOST, out)]

    def _reminder(self, msg: dict[str, Any], codec: type[McpStandard] | type[McpLegacy]) -> Outgoing | None:
        method = msg.get("method")
        source = codec.dialect
        if self.peer_declared is False and self.settings.require_declaration:
            self.record("dropped", method, source=source, why="server declared no reminder capability "
                        "(require_declaration is on)")
            return []
        try:
            decoded = codec.decode(msg)
        except ReminderError as exc:
            self.record("invalid", method, source=source, why=exc.loggable)
            return []
        target = self._target()
        held = target != source and target not in CODECS and self._fallback() == "tool_result"
        reminder, refusal = self.police(msg, decoded, method, origin=PEER, source=source, target=target,
                                        pending=len(self.pending) + len(self.held) if held else None,
                                        deliver=lambda r: self._deliver(msg, codec, r, changed=r is not decoded,
                                                                        released=True))
        if reminder is None:
            return refusal
        return self._deliver(msg, codec, reminder, changed=reminder is not decoded)

    def _deliver(self, msg: dict[str, Any], codec: type[McpStandard] | type[McpLegacy], reminder: Reminder, *,
                 changed: bool, released: bool = False) -> Outgoing | None:
        """The admitted reminder to the host, in its dialect (``released``: a coalesced one, later)."""
        method = msg.get("method")
        source = codec.dialect
        target = self._target()
        if self.outbox is not None and (kept := self.outbox.on_reminder(reminder, method, source, target)) is not None:
            return kept
        if target == source and not changed:
            self.record("passed", method, reminder, source=source, target=target)
            return [(HOST, msg)] if released else None
        if target in CODECS:
            params_meta = get_path(msg, "params", "_meta")
            # copy only the two levels the rewrite changes (`_meta` and `_meta.harn`), not the message
            params_meta = dict(params_meta) if isinstance(params_meta, dict) else None
            if params_meta is not None and isinstance(params_meta.get("harn"), dict):
                params_meta["harn"] = dict(params_meta["harn"])
            if source == "legacy" and params_meta is not None and (self.stage != "dual" or target == source):
                pop_path(params_meta, "harn", "reminder")
                params_meta.pop("harn.reminder", None)
            self.record("rewritten", method, reminder, source=source, target=target)
            return [(HOST, self.stamp(CODECS[target].encode(reminder, params_meta or None)))]
        if self._fallback() == "tool_result":
            self.pending.append(reminder)
            self.record("queued", method, reminder, source=source, target="none")
        else:
            self.record("dropped", method, reminder, source=source, target="none", why="host has no reminder support")
        return []

    def pending_counts(self) -> dict[str, int]:
        return {"coalesce": len(self.held), "tool_result": len(self.pending)}

    def wants_tick(self) -> bool:
        return super().wants_tick() or self.outbox is not None

    def abandon(self, why: str) -> None:
        super().abandon(why)
        for reminder in self.pending:
            self.record("dropped", "tools/call", reminder, target="none", why=why)
        self.pending.clear()

    def on_reconfigure(self, old: Any) -> None:
        self._watch_host()

    def _target(self) -> str:
        """The host's dialect, except that a modern host may only get a log message it asked for."""
        target = self.host_dialect
        if target == "auto":
            target = "standard"  # nothing learned yet: the standard message is harmless to unknowing hosts
        if target == "legacy" and self.modern and not self.opted_in:
            return "none"
        return target

    def _tool_results_carry_reminders(self) -> bool:
        """A `none` host, or a legacy host on 2026-07-28 (no unrequested log messages), may get
        reminders appended to tool results."""
        if self._fallback() != "tool_result":
            return False
        return self.host_dialect == "none" or (self.host_dialect == "legacy" and self.modern)

    def _fallback(self) -> str:
        return self.settings.fallback.mcp_host_none

    def _append_to_tool_result(self, msg: dict[str, Any]) -> Outgoing | None:
        content = get_path(msg, "result", "content")
        if not isinstance(content, list):
            return None
        out = copy.deepcopy(msg)
        out["result"]["content"].append({"type": "text", "text": render(self.pending, self.settings.envelope)})
        for reminder in self.pending:
            self.record("rendered", "tools/call", reminder, target="none")
        self.pending.clear()
        return [(HOST, out)]


def _is_handshake_result(msg: dict[str, Any]) -> bool:
    """An `initialize` / `server/discover` result, recognised even when its request went unseen."""
    result = msg.get("result")
    return (isinstance(result, dict) and isinstance(result.get("capabilities"), dict)
            and ("serverInfo" in result or "supportedVersions" in result))
