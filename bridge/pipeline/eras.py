"""Era bridging (issue 21, point 2): 2026-07-28 hosts in front of a server that speaks only
2025-11-25, sans-I/O.

The bridge is a layer below the MCP flow, as mitmproxy stacks its layers: the flow above goes on
seeing a 2026-07-28 server (its era rule, its reminder rules, untouched), the server a 2025-11-25
client. It is fed each frame the flow writes toward the server (`toward_server`) and each frame the
server writes (`from_server`), and answers with `Write` commands: ``PEER`` goes to the server,
``HOST`` goes up to the flow, as a frame the server sent (the transport feeds it to
`Flow.from_peer`, so a `server/discover` answered here is the handshake the flow learns from).

What it keeps is one table, `EraState`: the upstream session it opened (`initialize`, then
`notifications/initialized`, before anything else), what waits for it, the host's requests in
flight, the log level it set. No awaits, no clock, no logging.
"""
from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge.dialects.mcp import (
    CLIENT_CAPS_KEY,
    CLIENT_INFO_KEY,
    LISTEN_METHOD,
    LOG_LEVEL_KEY,
    LOG_METHOD,
    SERVER_INFO_KEY,
    McpLegacy,
)
from bridge.dialects.paths import params_meta
from bridge.jsonrpc import dumps, error_response, id_key, loads
from bridge.pipeline.commands import HOST, PEER, Forward, Send, Write
from bridge.pipeline.mcp import LEGACY_ERA, MODERN_ERA

#: The `_meta` keys 2026-07-28 reserves (the envelope, log opt-ins, subscription ids): never sent to
#: a 2025-11-25 server.
RESERVED_PREFIX = "io.modelcontextprotocol/"
#: The results 2026-07-28 lets a client cache, which must say for how long and for whom.
CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})
CACHE_FIELDS = {"ttlMs": 0, "cacheScope": "private"}
#: What the server may send on its own that a 2026-07-28 host reads outside a listen stream.
PASSED_NOTIFICATIONS = frozenset({"notifications/progress", "notifications/cancelled"})
#: -32601 (method not found) for what has no counterpart in the other era; -32600 for a request
#: the route's era forbids.
UNBRIDGED, WRONG_ERA = -32601, -32600
_OWN = itertools.count(1)


def unbridged(msg_id: Any, feature: str, why: str = "") -> dict[str, Any]:
    """The error for what the bridge cannot carry: it names the feature and both eras."""
    message = f"{feature} is not bridged between a {MODERN_ERA} host and a {LEGACY_ERA} server"
    return error_response(msg_id, UNBRIDGED, message + (f": {why}" if why else ""),
                          {"feature": feature, "hostEra": MODERN_ERA, "serverEra": LEGACY_ERA})


@dataclass
class EraState:
    """The bridge's table (one per connection to the server)."""

    #: the host's capability set and client info the session was opened with (canonical JSON)
    session: str | None = None
    #: the server's `initialize` result, once it answered
    opened: dict[str, Any] | None = None
    #: what the host sent before the session was open: parsed messages, sent in order once it is
    held: list[dict[str, Any]] = field(default_factory=list)
    #: the bridge's own requests in flight: own id → method
    own: dict[str, str] = field(default_factory=dict)
    #: the host's requests the server has not answered: id key → method
    asked: dict[Any, str] = field(default_factory=dict)
    #: those that opted in to log messages (`_meta` logLevel)
    opted: set[Any] = field(default_factory=set)
    #: the level `logging/setLevel` last set upstream
    level: str | None = None
    #: the host showed it speaks 2025-11-25 (a route whose `host_era` is `auto`): every frame passes
    through: bool = False


class LegacyServer:
    """2026-07-28 host → 2025-11-25 server. ``host_era``: the route's (`auto` or 2026-07-28);
    ``era``: the era the MCP flow settled for the host (the one place it is decided), read when the
    route's `host_era` is `auto`."""

    def __init__(self, host_era: str, era: Callable[[], str | None]):
        self.host_era = host_era
        self.era = era
        self.state = EraState()
        self._prefix = f"rb-era-{id(self):x}-"

    # -- the flow → the server -----------------------------------------------------------------
    def toward_server(self, data: bytes) -> list[Write]:
        """What to write for ``data`` (whole lines the flow wrote toward the server)."""
        out: list[Write] = []
        for line in data.split(b"\n"):
            if line.strip():
                out += self._toward(line)
        return out

    def _toward(self, line: bytes) -> list[Write]:
        state = self.state
        if state.through:
            return [Forward(PEER, line)]
        try:
            msg = loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):  # a batch or a bad frame: the server says what it makes of it
            return [Forward(PEER, line)]
        method = msg.get("method")
        request = isinstance(method, str) and "id" in msg
        if state.opened is None and method == "initialize":
            if self.host_era == "auto" and self.era() == LEGACY_ERA:
                state.through = True  # a 2025-11-25 host: nothing to bridge, for good
                return [Forward(PEER, line)]
            return [self._to_flow(error_response(
                msg.get("id"), WRONG_ERA, f"initialize is the {LEGACY_ERA} handshake; this route's hosts speak "
                f"{MODERN_ERA} (host_era): send server/discover, or leave host_era \"auto\""))]
        if request and method == "ping":  # gone in 2026-07-28; answered here, never asked of the server
            return [self._to_flow({"jsonrpc": "2.0", "id": msg["id"], "result": {"resultType": "complete"}})]
        if request and method == LISTEN_METHOD:
            return [self._to_flow(unbridged(msg["id"], LISTEN_METHOD, "not yet mapped to the GET stream"))]
        if request:
            refused = self._session_for(msg)
            if refused is not None:
                return [self._to_flow(refused)]
        if state.opened is None:
            state.held.append(msg)
            return [] if "initialize" in state.own.values() else [self._open(msg)]
        return self._send(msg, line)

    def _session_for(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The session a request belongs to: the first request's capabilities and client info open
        it; a request with others is refused (one server connection holds one session)."""
        meta = params_meta(msg)
        meta = meta if isinstance(meta, dict) else {}
        if CLIENT_CAPS_KEY not in meta and CLIENT_INFO_KEY not in meta:
            return None  # nothing said: the session's own
        key = json.dumps([meta.get(CLIENT_CAPS_KEY), meta.get(CLIENT_INFO_KEY)], sort_keys=True)
        if self.state.session is None:
            self.state.session = key
        elif key != self.state.session:
            return unbridged(msg["id"], "a second client capability set or client info",
                             f"this connection to the server holds the {LEGACY_ERA} session of the first one")
        return None

    def _open(self, first: dict[str, Any]) -> Write:
        """`initialize`, with what the host's first request said of itself."""
        meta = params_meta(first)
        meta = meta if isinstance(meta, dict) else {}
        caps = meta.get(CLIENT_CAPS_KEY)
        info = meta.get(CLIENT_INFO_KEY)
        params = {"protocolVersion": LEGACY_ERA, "capabilities": caps if isinstance(caps, dict) else {},
                  "clientInfo": info if isinstance(info, dict) else {"name": "reminder-bridge", "version": "0"}}
        return self._call("initialize", params)

    def _call(self, method: str, params: dict[str, Any]) -> Write:
        own = f"{self._prefix}{next(_OWN)}"
        self.state.own[own] = method
        return Send(PEER, dumps({"jsonrpc": "2.0", "id": own, "method": method, "params": params}))

    def _send(self, msg: dict[str, Any], line: bytes | None) -> list[Write]:
        """A host message toward the open session (a discover is answered from it)."""
        state = self.state
        method = msg.get("method")
        if method == "server/discover" and "id" in msg:
            return [self._to_flow({"jsonrpc": "2.0", "id": msg["id"], "result": self._discovered()})]
        out: list[Write] = []
        if isinstance(method, str) and "id" in msg:
            key = id_key(msg["id"])
            state.asked[key] = method
            meta = params_meta(msg)
            level = meta.get(LOG_LEVEL_KEY) if isinstance(meta, dict) else None
            if isinstance(level, str):
                state.opted.add(key)
                if level != state.level:
                    state.level = level
                    out.append(self._call("logging/setLevel", {"level": level}))
        stripped = _stripped(msg)
        if stripped is msg and line is not None:
            out.append(Forward(PEER, line))
        else:
            out.append(Send(PEER, dumps(stripped)))
        return out

    def _discovered(self) -> dict[str, Any]:
        """`server/discover`'s result, from the server's `initialize` result: every field 2026-07-28
        requires."""
        opened = self.state.opened or {}
        caps = opened.get("capabilities")
        result: dict[str, Any] = {"resultType": "complete", "supportedVersions": [MODERN_ERA],
                                  "capabilities": copy.deepcopy(caps) if isinstance(caps, dict) else {},
                                  **CACHE_FIELDS}
        if isinstance(opened.get("instructions"), str):
            result["instructions"] = opened["instructions"]
        if isinstance(opened.get("serverInfo"), dict):
            result["_meta"] = {SERVER_INFO_KEY: copy.deepcopy(opened["serverInfo"])}
        return result

    # -- the server → the flow -----------------------------------------------------------------
    def from_server(self, data: bytes) -> list[Write]:
        """What to write for ``data`` (whole lines from the server): up to the flow, or back."""
        out: list[Write] = []
        for line in data.split(b"\n"):
            if line.strip():
                out += self._from(line)
        return out

    def _from(self, line: bytes) -> list[Write]:
        state = self.state
        if state.through:
            return [Forward(HOST, line)]
        try:
            msg = loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            return [Forward(HOST, line)]
        method = msg.get("method")
        if method is None:
            return self._answer(msg, line)
        if "id" in msg:  # the server asks the client
            if method == "ping":
                return [Send(PEER, dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}))]
            return [Send(PEER, dumps(unbridged(msg["id"], method, "server-to-client requests are not carried "
                                                               "as input_required results yet")))]
        if method == LOG_METHOD and not McpLegacy.is_reminder(msg) and not state.opted:
            return []  # 2026-07-28: log messages only for a request that opted in (reminders: the flow's rule)
        if method == LOG_METHOD or method in PASSED_NOTIFICATIONS:
            return [Forward(HOST, line)]
        return []  # list_changed, resources/updated: a 2026-07-28 host gets them on a listen stream only

    def _answer(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        state = self.state
        msg_id = msg.get("id")
        own = state.own.pop(msg_id, None) if isinstance(msg_id, str) else None
        if own == "initialize":
            return self._opened(msg)
        if own is not None:
            return []  # logging/setLevel: a server without logging just sends none
        key = id_key(msg_id)
        method = state.asked.pop(key, None)
        state.opted.discard(key)
        result = msg.get("result")
        if method is None or not isinstance(result, dict):
            return [Forward(HOST, line)]
        out = {**msg, "result": {"resultType": "complete", **result}}
        if method in CACHEABLE:
            out["result"] = {**CACHE_FIELDS, **out["result"]}
        return [self._to_flow(out)]

    def _opened(self, msg: dict[str, Any]) -> list[Write]:
        """The server answered `initialize`: `notifications/initialized`, then what waited."""
        state = self.state
        held, state.held = state.held, []
        result = msg.get("result")
        if not isinstance(result, dict):  # refused: every request that waited is told why
            state.session = None
            error = msg.get("error") if isinstance(msg.get("error"), dict) else {}
            why = f"the {LEGACY_ERA} server refused initialize: {error.get('message', 'no reason given')}"
            return [self._to_flow(error_response(m["id"], error.get("code", -32603), why, error.get("data")))
                    for m in held if "id" in m and "method" in m]
        state.opened = result
        out: list[Write] = [Send(PEER, dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))]
        for waiting in held:
            out += self._send(waiting, None)
        return out

    @staticmethod
    def _to_flow(msg: dict[str, Any]) -> Write:
        return Send(HOST, dumps(msg))


def _stripped(msg: dict[str, Any]) -> dict[str, Any]:
    """``msg`` without the `_meta` keys 2026-07-28 reserves (the same object when it has none)."""
    meta = params_meta(msg)
    if not isinstance(meta, dict) or not any(k.startswith(RESERVED_PREFIX) for k in meta):
        return msg
    kept = {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)}
    params = {k: v for k, v in msg["params"].items() if k != "_meta"}
    if kept:
        params["_meta"] = kept
    return {**msg, "params": params}
