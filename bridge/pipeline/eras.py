"""Era bridging (issue 21, point 2), sans-I/O: 2026-07-28 hosts in front of a server that speaks
only 2025-11-25 (`LegacyServer`), and 2025-11-25 hosts in front of one that speaks only 2026-07-28
(`ModernServer`, in `era_reverse`; what both share is `era_layer.EraLayer`).

Each bridge is a layer below the MCP flow, as mitmproxy stacks its layers: the flow above goes on
seeing a 2026-07-28 server (its era rule, its reminder rules, untouched), the server a 2025-11-25
client. It is fed each frame the flow writes toward the server (`toward_server`) and each frame the
server writes (`from_server`), and answers with `Write` commands: ``PEER`` goes to the server,
``HOST`` goes up to the flow, as a frame the server sent (the transport feeds it to
`Flow.from_peer`, so a `server/discover` answered here is the handshake the flow learns from).

(`ModernServer` is the mirror: the flow sees a 2025-11-25 server.) What each keeps is one table:
`EraState`, the upstream session it opened (`initialize`, then `notifications/initialized`,
before anything else), what waits for it, the host's requests in flight, the log level it set,
its listen streams (`era_listens`) and the requests a server's own request suspended (`era_input`);
`ModernState`, the host's `initialize` and the envelope made of it, the one listen upstream, the
requests kept for an `input_required` retry. No awaits, no clock of its own, no logging of its own:
what waits on the host's input has a deadline (`input_wait_s`) on the clock the transport gives,
which asks for its timer with a `Wakeup` and calls `wake(now)` (as a flow's driver does).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.mcp import (
    CLIENT_CAPS_KEY, CLIENT_INFO_KEY, LISTEN_METHOD, LOG_LEVEL_KEY, LOG_METHOD, PROTOCOL_KEY,
    SERVER_INFO_KEY, VERSION_HEADER, McpLegacy, McpStandard,
)
from bridge.dialects.paths import get_path, params_meta
from bridge.jsonrpc import dumps, error_response, id_key
from bridge.pipeline.commands import HOST, PEER, Forward, Send, Write
from bridge.pipeline.era_input import (
    INPUT_KEY, INPUT_METHODS, PROGRESS, Suspended, Waiting, declared, input_required, size_of,
)
from bridge.pipeline.era_layer import (
    HELD_BYTES, HELD_MESSAGES, INPUT_EXPIRED, UNBRIDGED, WAIT_FULL, EraLayer, unbridged,
)
from bridge.pipeline.era_listens import Listens, stamped
from bridge.pipeline.era_reverse import SUBSCRIBED_URIS, ModernServer

#: The `_meta` keys 2026-07-28 reserves (the envelope, log opt-ins, subscription ids): never sent to
#: a 2025-11-25 server.
RESERVED_PREFIX = "io.modelcontextprotocol/"
#: The results 2026-07-28 lets a client cache, which must say for how long and for whom.
CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})
CACHE_FIELDS = {"ttlMs": 0, "cacheScope": "private"}
#: What the server may send on its own that a 2026-07-28 host reads outside a listen stream.
PASSED_NOTIFICATIONS = frozenset({"notifications/progress", "notifications/cancelled"})
#: The 2025-11-25 requests 2026-07-28 removed: a host of that era gets from the bridge what a
#: 2026-07-28 server answers (method not found), never the 2025-11-25 server's session-wide answer.
REMOVED = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
#: `from_server(came_on=)`: the session's own stream (2025-11-25 HTTP's GET), which no request owns
GET_STREAM = "GET"


@dataclass
class EraState:
    """The bridge's table (one per connection to the server)."""

    #: the host's capability set and client info the session was opened with (canonical JSON)
    session: str | None = None
    #: the server's `initialize` result, once it answered
    opened: dict[str, Any] | None = None
    #: what the host sent before the session was open: parsed messages, sent in order once it is
    held: list[dict[str, Any]] = field(default_factory=list)
    held_bytes: int = 0  # their frames' size, for the bound (`HELD_MESSAGES`, `HELD_BYTES`)
    #: the host's requests the server has not answered: id key → method
    asked: dict[Any, str] = field(default_factory=dict)
    #: those that opted in to log messages (`_meta` logLevel)
    opted: set[Any] = field(default_factory=set)
    #: the level `logging/setLevel` last set upstream
    level: str | None = None
    #: the host's open listen streams
    listens: Listens = field(default_factory=Listens)
    #: the host's requests answered `input_required` while the server's own request waits
    inputs: Suspended = field(default_factory=Suspended)


class LegacyServer(EraLayer):
    """2026-07-28 host → 2025-11-25 server."""

    bridges = (MODERN_ERA, LEGACY_ERA)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.state = EraState()

    @staticmethod
    def refuses(msg: Any, version: str | None) -> dict[str, Any] | None:
        """The error a 2026-07-28 server answers a request ``msg`` with before it reads it (HTTP, with
        400; ``version``: its `MCP-Protocol-Version` header): an incomplete envelope (-32602), a
        header that is not its `_meta` version (-32020), a version it does not speak (-32022, naming
        the one it does); None for a request it takes (and for anything else: the flow judges it)."""
        if not (isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg):
            return None
        meta = params_meta(msg)
        if not isinstance(meta, dict) or PROTOCOL_KEY not in meta or CLIENT_CAPS_KEY not in meta:
            return error_response(msg["id"], -32602, f"Invalid params: a {MODERN_ERA} request's _meta carries "
                                  f"{PROTOCOL_KEY} and {CLIENT_CAPS_KEY}")
        if meta[PROTOCOL_KEY] != version:
            return error_response(msg["id"], -32020, "Header mismatch: MCP-Protocol-Version is not the request's "
                                  f"_meta {PROTOCOL_KEY}")
        if version != MODERN_ERA:
            return error_response(msg["id"], -32022, "Unsupported protocol version",
                                  {"supported": [MODERN_ERA], "requested": version})
        return None

    def http_headers(self, frame: bytes) -> dict[str, str]:
        """The version `initialize` settled, once it did; never a 2026-07-28 header."""
        version = (self.state.opened or {}).get("protocolVersion")
        return {VERSION_HEADER: version} if isinstance(version, str) and version != MODERN_ERA else {}

    # -- the flow → the server -----------------------------------------------------------------
    def _toward(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        state = self.state
        method = msg.get("method")
        request = isinstance(method, str) and "id" in msg
        if state.opened is None and method == "initialize" and self.host_era == "auto" and self.era() == LEGACY_ERA:
            self.through = True  # a 2025-11-25 host: nothing to bridge, for good
            return [Forward(PEER, line)]
        if request and method in REMOVED:  # answered here, never asked of the server
            hint = (": send server/discover, or leave host_era \"auto\" for 2025-11-25 hosts"
                    if method == "initialize" else "")
            return [self._to_flow(error_response(
                msg["id"], UNBRIDGED, f"Method not found: {method} is a {LEGACY_ERA} method, removed in {MODERN_ERA}"
                f"{hint}", {"method": method, "hostEra": MODERN_ERA, "serverEra": LEGACY_ERA}))]
        if request:
            refused = self._session_for(msg)
            if refused is not None:
                return [self._to_flow(refused)]
        if state.opened is None:
            full = self._hold(state, msg, line)
            if full is not None:
                return full
            return [] if "initialize" in self.own.values() else [self._open(msg)]
        return self._send(msg, line)

    def _session_for(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The session a request belongs to: the first request's capabilities and client info open
        it; a request with others is refused (one server connection holds one session)."""
        key = session_key(msg)
        if key is None:
            return None  # nothing said: the session's own
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

    def _send(self, msg: dict[str, Any], line: bytes | None) -> list[Write]:
        """A host message toward the open session (a discover is answered from it)."""
        state = self.state
        method = msg.get("method")
        if method == "server/discover" and "id" in msg:
            return [self._to_flow({"jsonrpc": "2.0", "id": msg["id"], "result": self._discovered()})]
        if method == LISTEN_METHOD and "id" in msg:
            return self._listen(msg)
        token = get_path(msg, "params", "requestState") if "id" in msg else None
        resumed = state.inputs.resume(token, msg["id"]) if token is not None else None
        if resumed is not None:
            return self._resumed(msg, resumed)
        if isinstance(token, str) and token.startswith(self._prefix):  # one the bridge minted, given up since
            return [self._to_flow(error_response(
                msg["id"], -32602, f"Invalid params: requestState names an input request the era bridge gave up "
                f"(not retried within {self.input_wait_s:g} s, input_wait_s): send the request again without it",
                {"field": "requestState", "hostEra": MODERN_ERA, "serverEra": LEGACY_ERA}))]
        if method == "notifications/cancelled":
            gone = state.listens.close(id_key(get_path(msg, "params", "requestId")))
            if gone is not None:  # a listen stream the host ended: the server never knew of it
                return self._unsubscribe(gone)
        out: list[Write] = []
        if isinstance(method, str) and "id" in msg:
            key = id_key(msg["id"])
            state.asked[key] = method
            progress = get_path(msg, "params", "_meta", "progressToken")
            if progress is not None:
                state.inputs.asks_progress(key, progress)
            if self._level(msg, out):
                state.opted.add(key)
        stripped = _stripped(msg)
        if stripped is msg and line is not None:
            out.append(Forward(PEER, line))
        else:
            out.append(Send(PEER, dumps(stripped)))
        return out

    def ended(self, request_id: Any) -> list[Write]:
        """The host's exchange of request ``request_id`` (its id as the server knows it) ended before
        its answer (HTTP: the host went away; 2026-07-28 cancels so): a listen's resources no stream
        wants any more are unsubscribed; a request under way (or the one a retry stood for) is
        cancelled upstream, and what its stream still brings is no exchange's (a reminder: held)."""
        key = id_key(request_id)
        gone = self.state.listens.close(key)
        if gone is not None:
            return self._unsubscribe(gone)
        inputs = self.state.inputs
        key = next((k for k, retry in inputs.rebound.items() if id_key(retry) == key), key)
        return self._cancel(key, f"the {MODERN_ERA} host closed the request's stream")

    def _cancel(self, key: Any, reason: str) -> list[Write]:
        """Host request ``key`` is over for the host (it left, or will never retry it): the server is
        told `notifications/cancelled`, and nothing of it is kept."""
        if self.state.asked.pop(key, None) is None:
            return []
        self.state.opted.discard(key)
        self.state.inputs.rebound.pop(key, None)
        self.state.inputs.over(key)
        for held in self.state.inputs.take_held(key):
            self._dropped(held, f"kept for a retry that can come no more: {reason}")
        return [Send(PEER, dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
            "requestId": key[1], "reason": reason}}))]

    def _expire(self, now: float) -> list[Write]:
        """The server's requests the host did not retry within `input_wait_s`: each gets the error
        that says so; a host request nothing of which waits any more is cancelled upstream (its
        retry could answer nothing now)."""
        inputs = self.state.inputs
        out: list[Write] = []
        for entry in inputs.expired(now):
            why = (f"the {MODERN_ERA} host did not answer {entry.method} (sent to it as an input_required "
                   f"result) within {self.input_wait_s:g} s (input_wait_s)")
            self._gave_up("expired", why, entry.method)
            out.append(Send(PEER, dumps(error_response(entry.server_id, INPUT_EXPIRED, why, {
                "feature": entry.method, "waitedS": self.input_wait_s, "hostEra": MODERN_ERA,
                "serverEra": LEGACY_ERA}))))
            if not inputs.suspended(entry.key):
                for held in inputs.take_held(entry.key):
                    self._dropped(held, f"kept for a retry that can come no more: {why}")
                out += self._cancel(entry.key, why)
        return out

    def _next_deadline(self) -> float | None:
        return self.state.inputs.next_deadline()

    def _unsubscribe(self, uris: list[str]) -> list[Write]:
        return [self._call("resources/unsubscribe", {"uri": uri}) for uri in uris]

    def _level(self, msg: dict[str, Any], out: list[Write]) -> bool:
        """Whether ``msg`` opts in to log messages (`_meta` logLevel): `logging/setLevel` upstream
        when the level is new."""
        meta = params_meta(msg)
        level = meta.get(LOG_LEVEL_KEY) if isinstance(meta, dict) else None
        if not isinstance(level, str):
            return False
        if level != self.state.level:
            self.state.level = level
            out.append(self._call("logging/setLevel", {"level": level}))
        return True

    def _listen(self, msg: dict[str, Any]) -> list[Write]:
        """A listen request opens a stream here (the server has none to give): subscriptions and the
        log level upstream, then its acknowledgement up to the flow, as the server's."""
        caps = (self.state.opened or {}).get("capabilities")
        ack, fresh = self.state.listens.listen(id_key(msg["id"]), msg, caps if isinstance(caps, dict) else {})
        out = [self._call("resources/subscribe", {"uri": uri}) for uri in fresh]
        self._level(msg, out)
        return [*out, self._to_flow(ack)]

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
    def _from(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        state = self.state
        method = msg.get("method")
        if method is None:
            return self._answer(msg, line)
        if "id" in msg:  # the server asks the client
            if method == "ping":
                return [Send(PEER, dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}))]
            if method in INPUT_METHODS:
                return self._input(msg)
            return [Send(PEER, dumps(unbridged(msg["id"], method, "no such request of a server to its client "
                                               f"exists in {MODERN_ERA}")))]
        if method in PASSED_NOTIFICATIONS:
            meanwhile = self._while_suspended(msg, len(line))
            return [Forward(HOST, line)] if meanwhile is None else meanwhile
        stdio = self.came_on is None  # one channel: a message is taken as a request's while one is under way
        on_request = not stdio and self.came_on != GET_STREAM  # HTTP: on that request's answer stream
        if McpLegacy.is_reminder(msg) or McpStandard.is_reminder(msg):  # a reminder in either dialect
            if (on_request and self._waits(id_key(self.came_on))) or (stdio and state.asked):
                return [Forward(HOST, line)]  # the request's (once retried: the retry's, `answering`)
            # ambient (or no exchange of the host waits for its request's answer): stamped as a listen
            # stream's, so the flow puts it on the stream that opted in, or holds it for the fallback
            return [self._to_flow(stamped(msg, state.listens.for_reminders()))]
        meanwhile = self._while_suspended(msg, len(line)) if method == LOG_METHOD else None
        if meanwhile is not None:
            return meanwhile
        if method == LOG_METHOD and (id_key(self.came_on) in state.opted if on_request else stdio and state.opted):
            return [Forward(HOST, line)]  # a request that opted in to log messages is under way
        # list_changed, resources/updated, log messages: a 2026-07-28 host gets them on a listen stream only
        return [self._to_flow(copy) for copy in state.listens.copies(msg)]

    def _while_suspended(self, msg: dict[str, Any], size: int) -> list[Write] | None:
        """A notification for a host request answered `input_required` (its progress, by its
        progressToken; over HTTP, a log line on its stream): the 2026-07-28 request's stream is over,
        so it is kept for the retry's, which carries it once it comes (a progress, the latest only,
        under the token the retry asked for); None: not such a notification."""
        inputs = self.state.inputs
        if msg["method"] == PROGRESS:
            key = inputs.tokens.get(id_key(get_path(msg, "params", "progressToken")))
        elif msg["method"] == LOG_METHOD and self.came_on not in (None, GET_STREAM):
            key = id_key(self.came_on)
        else:
            return None
        if key is None:
            return None
        if inputs.suspended(key):
            if inputs.hold(key, msg, size):
                return []
            return self._dropped(msg, "kept for the host's retry of the request it belongs to, where no room was "
                                 f"left ({inputs.held_count} notifications, {inputs.held_bytes} bytes already wait)")
        if msg["method"] == PROGRESS and key in inputs.retokened:  # retried: the progress of the retry
            return self._retokened(msg, inputs.retokened[key])
        return None

    def _retokened(self, msg: dict[str, Any], token: Any) -> list[Write]:
        """A progress of the request a retry stands for, under the token the retry asked for."""
        if token is None:
            return self._dropped(msg, "the host's retry of its request asked for no progress")
        return [self._to_flow({**msg, "params": {**msg["params"], "progressToken": token}})]

    def _dropped(self, msg: dict[str, Any], why: str) -> list[Write]:
        """A notification no stream of the host can take: dropped, counted and logged, never silent."""
        if self.recorder is not None:
            self.recorder.era_notification_dropped(msg["method"])
            self.recorder.warning("era_notification_dropped", method=msg["method"], why=why)
        return []

    def _waits(self, key: Any) -> bool:
        """An exchange of the host waits for request ``key``'s answer: it is under way, neither
        answered `input_required` with no retry yet, nor left by its host (`ended`)."""
        return key in self.state.asked and not self.state.inputs.suspended(key)

    def answering(self, request_id: Any) -> Any:
        """The id of the host request that what comes on ``request_id``'s answer stream is for: its
        retry's, once the host retried it after an `input_required` answer (HTTP), else its own."""
        return self.state.inputs.rebound.get(id_key(request_id), request_id)

    def _input(self, msg: dict[str, Any]) -> list[Write]:
        """The server asks its client: the host's request in flight is answered `input_required`
        with the question; its retry carries the answer back (`_send`)."""
        state = self.state
        method = msg["method"]
        caps = json.loads(state.session)[0] if state.session is not None else None
        if not declared(caps, method):
            cap = INPUT_METHODS[method]
            return [Send(PEER, dumps(error_response(
                msg["id"], UNBRIDGED, f"{method} needs the client capability {cap}, which the {MODERN_ERA} host "
                f"behind this {LEGACY_ERA} session did not declare",
                {"feature": method, "capability": cap, "hostEra": MODERN_ERA, "serverEra": LEGACY_ERA})))]
        key = state.inputs.carrier(state.asked, None if self.came_on == GET_STREAM else id_key(self.came_on))
        if key is None:
            return [Send(PEER, dumps(unbridged(msg["id"], method, "no request of the host is under way to carry it "
                                               "as an input_required result")))]
        inputs = state.inputs
        size = size_of(key[1], msg["id"])
        if inputs.full(size):
            why = (f"{len(inputs.waiting)} requests of the server ({inputs.bytes} bytes) already wait for the "
                   f"{MODERN_ERA} host's retry, the most the era bridge holds for one session")
            self._gave_up("full", why, method)
            return [Send(PEER, dumps(error_response(msg["id"], WAIT_FULL, f"{method} was not carried: {why}",
                                                    {"feature": method, "hostEra": MODERN_ERA,
                                                     "serverEra": LEGACY_ERA})))]
        token = self._mint("input-")
        inputs.suspend(token, Waiting(key, msg["id"], method, self.clock() + self.input_wait_s, size))
        return self._timed([self._to_flow({"jsonrpc": "2.0", "id": inputs.host_id(key),
                                           "result": input_required(msg, token)})])

    def _resumed(self, msg: dict[str, Any], resumed: Waiting) -> list[Write]:
        """The host's retry: its answer goes to the server's request (the server still owes the
        first), and what the server said of that request meanwhile to the retry's stream."""
        inputs, server_id = self.state.inputs, resumed.server_id
        out: list[Write] = []
        if not inputs.suspended(resumed.key):  # (no other question of the server's waits on it)
            inputs.retokened[resumed.key] = token = get_path(msg, "params", "_meta", "progressToken")
            for held in inputs.take_held(resumed.key):
                out += self._retokened(held, token) if held["method"] == PROGRESS else [self._to_flow(held)]
        answer = get_path(msg, "params", "inputResponses", INPUT_KEY)
        if isinstance(answer, dict):
            reply = {"jsonrpc": "2.0", "id": server_id, "result": {k: v for k, v in answer.items() if k != "resultType"}}
        else:
            reply = error_response(server_id, -32603, "the host's retry carried no answer to this request")
        return [*out, Send(PEER, dumps(reply))]

    def _answer(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        state = self.state
        msg_id = msg.get("id")
        own = self.own.pop(msg_id, None) if isinstance(msg_id, str) else None
        if own == "initialize":
            return self._opened(msg)
        if own is not None:
            return []  # logging/setLevel: a server without logging just sends none
        key = id_key(msg_id)
        method = state.asked.pop(key, None)
        state.opted.discard(key)
        retry = state.inputs.rebound.pop(key, None)
        state.inputs.over(key)
        if retry is not None:  # the host knows the request by the id of its retry
            msg = {**msg, "id": retry}
        result = msg.get("result")
        if method is None or not isinstance(result, dict):
            return [Forward(HOST, line) if retry is None else self._to_flow(msg)]
        out = {**msg, "result": {"resultType": "complete", **result}}
        if method in CACHEABLE:
            out["result"] = {**CACHE_FIELDS, **out["result"]}
        return [self._to_flow(out)]

    def _opened(self, msg: dict[str, Any]) -> list[Write]:
        """The server answered `initialize`: `notifications/initialized`, then what waited."""
        state = self.state
        held, state.held, state.held_bytes = state.held, [], 0
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


def session_key(msg: Any) -> str | None:
    """The 2025-11-25 session a 2026-07-28 message belongs to: its client capabilities and client
    info as canonical JSON (None: it names neither)."""
    meta = params_meta(msg) if isinstance(msg, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    if CLIENT_CAPS_KEY not in meta and CLIENT_INFO_KEY not in meta:
        return None
    return json.dumps([meta.get(CLIENT_CAPS_KEY), meta.get(CLIENT_INFO_KEY)], sort_keys=True)


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


#: What the era bridge's modules define, for its transports and tests to take from here.
__all__ = ["BRIDGES", "EraLayer", "EraState", "GET_STREAM", "HELD_BYTES", "HELD_MESSAGES", "INPUT_EXPIRED",
           "LegacyServer", "ModernServer", "SUBSCRIBED_URIS", "UNBRIDGED", "WAIT_FULL", "session_key", "unbridged"]

#: The bridge for a server of each era (`RouteSettings.bridged_server_era`).
BRIDGES: dict[str, type[EraLayer]] = {LEGACY_ERA: LegacyServer, MODERN_ERA: ModernServer}
