"""Era bridging (issue 21, point 2), sans-I/O: 2026-07-28 hosts in front of a server that speaks
only 2025-11-25 (`LegacyServer`), and 2025-11-25 hosts in front of one that speaks only 2026-07-28
(`ModernServer`).

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
requests kept for an `input_required` retry. No awaits, no clock, no logging.
"""
from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.mcp import (
    ACK_METHOD, CLIENT_CAPS_KEY, CLIENT_INFO_KEY, CODECS, LISTEN_METHOD, LOG_LEVEL_KEY, LOG_METHOD, PROTOCOL_KEY,
    REMINDERS_FILTER, SERVER_INFO_KEY, SUBSCRIPTION_KEY, VERSION_HEADER, McpLegacy, McpStandard, routing_headers,
)
from bridge.dialects.paths import get_path, params_meta
from bridge.jsonrpc import dumps, error_response, id_key, loads
from bridge.pipeline.commands import HOST, PEER, Forward, Send, Write
from bridge.pipeline.era_input import INPUT_KEY, INPUT_METHODS, Retries, Retry, Suspended, declared, input_required
from bridge.pipeline.era_listens import LIST_CHANGED, Listens, stamped
from bridge.telemetry import Recorder

#: The `_meta` keys 2026-07-28 reserves (the envelope, log opt-ins, subscription ids): never sent to
#: a 2025-11-25 server.
RESERVED_PREFIX = "io.modelcontextprotocol/"
#: The results 2026-07-28 lets a client cache, which must say for how long and for whom.
CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})
CACHE_FIELDS = {"ttlMs": 0, "cacheScope": "private"}
#: What the server may send on its own that a 2026-07-28 host reads outside a listen stream.
PASSED_NOTIFICATIONS = frozenset({"notifications/progress", "notifications/cancelled"})
#: -32601 (method not found) for what has no counterpart in the other era.
UNBRIDGED = -32601
#: The 2025-11-25 requests 2026-07-28 removed: a host of that era gets from the bridge what a
#: 2026-07-28 server answers (method not found), never the 2025-11-25 server's session-wide answer.
REMOVED = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
#: What may wait for the upstream handshake (`initialize`, or `server/discover`), at most: a host
#: that floods while it is under way gets errors for its requests, not the proxy's memory.
HELD_MESSAGES, HELD_BYTES = 256, 4 << 20
#: the JSON-RPC error for a request the wait had no room left for
WAIT_FULL = -32000
#: `from_server(came_on=)`: the session's own stream (2025-11-25 HTTP's GET), which no request owns
GET_STREAM = "GET"
#: What a 2025-11-25 host may have subscribed to at once through the reverse bridge, at most: the
#: URIs ride every `subscriptions/listen` the bridge opens upstream.
SUBSCRIBED_URIS, SUBSCRIBED_BYTES = 1024, 1 << 20
_OWN = itertools.count(1)


def unbridged(msg_id: Any, feature: str, why: str = "", host: str = MODERN_ERA,
              server: str = LEGACY_ERA) -> dict[str, Any]:
    """The error for what the bridge cannot carry: it names the feature and both eras."""
    message = f"{feature} is not bridged between a {host} host and a {server} server"
    return error_response(msg_id, UNBRIDGED, message + (f": {why}" if why else ""),
                          {"feature": feature, "hostEra": host, "serverEra": server})


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


class EraLayer:
    """What both directions share: frames split into lines and parsed (a batch or a bad frame goes
    on for the other side to judge), the pass-through of a host whose era needs no bridge, and the
    bridge's own requests. ``host_era``: the route's; ``era``: the era the MCP flow settled for the
    host (the one place it is decided), read when the route's `host_era` is `auto`; ``recorder``
    counts each host request the bridge takes (`Recorder.bridged`: the console's era mix);
    ``streams``: the transport keeps a `subscriptions/listen` request open as its stream (stdio:
    one channel)."""

    #: the eras this bridge stands between: (the host's, the server's)
    bridges: tuple[str, str]

    def __init__(self, host_era: str, era: Callable[[], str | None], recorder: Recorder | None = None,
                 streams: bool = False):
        self.host_era = host_era
        self.era = era
        self.recorder = recorder
        self.streams = streams
        self.through = False  # the host speaks the server's era (`host_era` auto): every frame passes
        self.own: dict[str, str] = {}  # the bridge's own requests in flight: own id → method
        self.came_on: Any = None  # where the server's message at hand came (`from_server`)
        self._prefix = f"rb-era-{id(self):x}-"

    def toward_server(self, data: bytes) -> list[Write]:
        """What to write for ``data`` (whole lines the flow wrote toward the server)."""
        return self._each(data, PEER, self._toward)

    def from_server(self, data: bytes, came_on: Any = None) -> list[Write]:
        """What to write for ``data`` (whole lines from the server): up to the flow, or back.
        ``came_on``: where it came (HTTP): `GET_STREAM`, or the id of the request on whose answer
        stream; None: the one channel there is (stdio), which tells no more."""
        self.came_on = came_on
        return self._each(data, HOST, self._from)

    def _each(self, data: bytes, to: str, handle: Callable[[dict[str, Any], bytes], list[Write]]) -> list[Write]:
        out: list[Write] = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                msg = None if self.through else loads(line)
            except ValueError:
                msg = None
            out += handle(msg, line) if isinstance(msg, dict) else [Forward(to, line)]
            if to == PEER and not self.through and self.recorder is not None and isinstance(msg, dict) \
                    and "id" in msg and isinstance(msg.get("method"), str):
                self.recorder.bridged(*self.bridges)
        return out

    def failed(self, data: bytes, error: dict[str, Any]) -> list[Write]:
        """The server cannot answer ``data`` (lines the bridge wrote toward it: an HTTP upstream that
        failed the request): each request in it gets ``error`` as the server's answer, so what waits
        on it (the host's request, the bridge's own `initialize` and all it held) is answered."""
        out: list[Write] = []
        for line in data.split(b"\n"):
            try:
                msg = loads(line) if line.strip() else None
            except ValueError:
                continue
            if isinstance(msg, dict) and "id" in msg and isinstance(msg.get("method"), str):
                out += self.from_server(dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}))
        return out

    def http_headers(self, frame: bytes) -> dict[str, str]:
        """What MCP over HTTP mirrors in headers of ``frame`` (a line the bridge wrote toward the
        server; empty: the session's GET or DELETE), in the server's era (`stdio --upstream`)."""
        raise NotImplementedError

    def carried(self, frame: bytes) -> bool:
        """Whether the bridge still carries a host request of ``frame`` on after the server's answer
        to it (an `input_required` retry), so an exchange that ends without it left nothing unanswered."""
        return False

    def _toward(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        raise NotImplementedError

    def _from(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        raise NotImplementedError

    def _call(self, method: str, params: dict[str, Any]) -> Write:
        own = f"{self._prefix}{next(_OWN)}"
        self.own[own] = method
        return Send(PEER, dumps({"jsonrpc": "2.0", "id": own, "method": method, "params": params}))

    @staticmethod
    def _to_flow(msg: dict[str, Any]) -> Write:
        return Send(HOST, dumps(msg))

    def _hold(self, state: Any, msg: dict[str, Any], line: bytes) -> list[Write] | None:
        """Keep ``msg`` until the upstream handshake is answered (None), or, with the wait full, the
        error for a request (a notification is let go: nothing could tell its sender)."""
        if len(state.held) < HELD_MESSAGES and state.held_bytes + len(line) <= HELD_BYTES:
            state.held.append(msg)
            state.held_bytes += len(line)
            return None
        if "id" in msg and "method" in msg:
            return [self._to_flow(error_response(
                msg["id"], WAIT_FULL, f"{len(state.held)} messages ({state.held_bytes} bytes) already wait for the "
                "server's handshake, the most the era bridge holds: send this again once it is answered"))]
        return []


class LegacyServer(EraLayer):
    """2026-07-28 host → 2025-11-25 server."""

    bridges = (MODERN_ERA, LEGACY_ERA)

    def __init__(self, host_era: str, era: Callable[[], str | None], recorder: Recorder | None = None,
                 streams: bool = False):
        super().__init__(host_era, era, recorder, streams)
        self.state = EraState()

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
        resumed = state.inputs.resume(get_path(msg, "params", "requestState"), msg["id"]) if "id" in msg else None
        if resumed is not None:
            return self._resumed(msg, resumed[1])
        if method == "notifications/cancelled":
            gone = state.listens.close(id_key(get_path(msg, "params", "requestId")))
            if gone is not None:  # a listen stream the host ended: the server never knew of it
                return self._unsubscribe(gone)
        out: list[Write] = []
        if isinstance(method, str) and "id" in msg:
            key = id_key(msg["id"])
            state.asked[key] = method
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
        if self.state.asked.pop(key, None) is None:
            return []
        self.state.opted.discard(key)
        inputs.rebound.pop(key, None)
        return [Send(PEER, dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
            "requestId": key[1], "reason": f"the {MODERN_ERA} host closed the request's stream"}}))]

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
            return [Forward(HOST, line)]
        stdio = self.came_on is None  # one channel: a message is taken as a request's while one is under way
        on_request = not stdio and self.came_on != GET_STREAM  # HTTP: on that request's answer stream
        if McpLegacy.is_reminder(msg) or McpStandard.is_reminder(msg):  # a reminder in either dialect
            if (on_request and self._waits(id_key(self.came_on))) or (stdio and state.asked):
                return [Forward(HOST, line)]  # the request's (once retried: the retry's, `answering`)
            # ambient (or no exchange of the host waits for its request's answer): stamped as a listen
            # stream's, so the flow puts it on the stream that opted in, or holds it for the fallback
            return [self._to_flow(stamped(msg, state.listens.for_reminders()))]
        if method == LOG_METHOD and (id_key(self.came_on) in state.opted if on_request else stdio and state.opted):
            return [Forward(HOST, line)]  # a request that opted in to log messages is under way
        # list_changed, resources/updated, log messages: a 2026-07-28 host gets them on a listen stream only
        return [self._to_flow(copy) for copy in state.listens.copies(msg)]

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
        token = f"{self._prefix}input-{next(_OWN)}"
        state.inputs.suspend(token, key, msg["id"])
        return [self._to_flow({"jsonrpc": "2.0", "id": state.inputs.host_id(key),
                               "result": input_required(msg, token)})]

    def _resumed(self, msg: dict[str, Any], server_id: Any) -> list[Write]:
        """The host's retry: its answer goes to the server's request (the server still owes the first)."""
        answer = get_path(msg, "params", "inputResponses", INPUT_KEY)
        if isinstance(answer, dict):
            reply = {"jsonrpc": "2.0", "id": server_id, "result": {k: v for k, v in answer.items() if k != "resultType"}}
        else:
            reply = error_response(server_id, -32603, "the host's retry carried no answer to this request")
        return [Send(PEER, dumps(reply))]

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


@dataclass
class ModernState:
    """The reverse bridge's table: what the host's `initialize` said, and what `server/discover` did."""

    #: the host's `initialize` request, until `server/discover` answered it
    initialize: dict[str, Any] | None = None
    #: the `_meta` envelope every request carries upstream (the host's version, capabilities, info)
    envelope: dict[str, Any] | None = None
    #: what the host sent while discover was under way, sent once it answered
    held: list[dict[str, Any]] = field(default_factory=list)
    held_bytes: int = 0  # their frames' size, for the bound (`HELD_MESSAGES`, `HELD_BYTES`)
    #: the level the host's `logging/setLevel` asked for: every later request opts in at it
    level: str | None = None
    #: the server's capabilities (discover's), and the resource URIs the host subscribed to
    caps: dict[str, Any] = field(default_factory=dict)
    uris: list[str] = field(default_factory=list)
    #: the one `subscriptions/listen` upstream that carries the host's notifications (its own id)
    listen: str | None = None
    #: the host's requests in flight, and those an `input_required` result holds for the host's answers
    retries: Retries = field(default_factory=Retries)


class ModernServer(EraLayer):
    """2025-11-25 host → 2026-07-28 server: `initialize` is answered from `server/discover`, every
    request carries the host's envelope, and `ping`, `logging/setLevel` and
    `notifications/initialized` (gone in 2026-07-28) stay here."""

    bridges = (LEGACY_ERA, MODERN_ERA)

    def __init__(self, host_era: str, era: Callable[[], str | None], recorder: Recorder | None = None,
                 streams: bool = False):
        super().__init__(host_era, era, recorder, streams)
        self.state = ModernState()

    def http_headers(self, frame: bytes) -> dict[str, str]:
        """A request's envelope version, method and name; anything else the version alone."""
        try:
            msg = loads(frame)
        except ValueError:
            msg = None
        return (routing_headers(msg) if isinstance(msg, dict) else {}) or {VERSION_HEADER: MODERN_ERA}

    def carried(self, frame: bytes) -> bool:
        """A request the server answered `input_required`: waiting for the host's answers, or retried."""
        try:
            msg = loads(frame)
        except ValueError:
            return False
        if not isinstance(msg, dict) or "id" not in msg:
            return False
        key, retries = id_key(msg["id"]), self.state.retries
        again = retries.sent.get(key)
        return key in retries.open or (again is not None and ("inputResponses" in again["params"]
                                                               or "requestState" in again["params"]))

    def _toward(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        state = self.state
        method = msg.get("method")
        request = isinstance(method, str) and "id" in msg
        if state.envelope is None and self.host_era == "auto" and self.era() == MODERN_ERA:
            self.through = True  # a 2026-07-28 host: nothing to bridge, for good
            return [Forward(PEER, line)]
        if method is None and isinstance(msg.get("id"), str) and msg["id"] in state.retries.asking:
            return self._answered(msg)
        if method == "initialize" and request:
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            caps, info = params.get("capabilities"), params.get("clientInfo")
            state.initialize = msg
            state.envelope = {PROTOCOL_KEY: MODERN_ERA, CLIENT_CAPS_KEY: caps if isinstance(caps, dict) else {},
                              CLIENT_INFO_KEY: info if isinstance(info, dict) else {}}
            return [self._call("server/discover", {"_meta": dict(state.envelope)})]
        if method == "notifications/cancelled":  # nothing kept for a retry of what the host gave up
            key = id_key(get_path(msg, "params", "requestId"))
            state.retries.sent.pop(key, None)
            state.retries.drop(key)
        if method == "notifications/initialized" or method == "notifications/roots/list_changed":
            return []  # no 2026-07-28 counterpart: the server has no session to be told of
        if request and method in ("ping", "logging/setLevel"):
            out = [self._to_flow({"jsonrpc": "2.0", "id": msg["id"], "result": {}})]
            level = get_path(msg, "params", "level")
            if method == "logging/setLevel" and isinstance(level, str) and level != state.level:
                state.level = level
                return self._relisten() + out  # the stream's own log messages at the new level
            return out
        if request and method in ("resources/subscribe", "resources/unsubscribe"):
            if not self.streams:
                return [self._to_flow(unbridged(msg["id"], method, "not yet mapped to subscriptions/listen over "
                                                "HTTP", host=LEGACY_ERA, server=MODERN_ERA))]
            return self._subscribe(msg, method == "resources/subscribe")
        if state.initialize is not None:  # discover is under way: what follows waits for it
            return self._hold(state, msg, line) or []
        return self._send(msg, line)

    def _send(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        """A request with the host's envelope (and its log level); anything else as it came."""
        envelope = self.state.envelope
        if not (isinstance(msg.get("method"), str) and "id" in msg) or envelope is None:
            return [Forward(PEER, line)]
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        stamped = {**meta, **envelope}
        if self.state.level is not None:
            stamped[LOG_LEVEL_KEY] = self.state.level
        out = {**msg, "params": {**params, "_meta": stamped}}
        if self.streams:  # kept for its retry, should the server answer input_required
            self.state.retries.sent[id_key(msg["id"])] = out
        return [Send(PEER, dumps(out))]

    def _ask_host(self, key: Any, request: dict[str, Any], result: dict[str, Any]) -> list[Write]:
        """The server answered ``request`` `input_required`: each of its questions goes to the host as
        the request 2025-11-25 has for it; their answers make the retry (`_answered`)."""
        state = self.state
        asks = result.get("inputRequests") if isinstance(result.get("inputRequests"), dict) else {}
        caps = (state.envelope or {}).get(CLIENT_CAPS_KEY)
        for ask in asks.values():
            method = ask.get("method") if isinstance(ask, dict) else None
            if method not in INPUT_METHODS or not declared(caps, method):
                cap = INPUT_METHODS.get(method, "?") if isinstance(method, str) else "?"
                return [self._to_flow(error_response(
                    request["id"], UNBRIDGED, f"the {MODERN_ERA} server needs {method} (client capability {cap}), "
                    f"which the {LEGACY_ERA} host did not declare",
                    {"feature": method, "capability": cap, "hostEra": LEGACY_ERA, "serverEra": MODERN_ERA}))]
        if not asks:  # only requestState: the retry at once
            return self._retry(Retry(request, result.get("requestState"), set()))
        state.retries.open[key] = Retry(request, result.get("requestState"), set(asks))
        out = []
        for name, ask in asks.items():
            own = f"{self._prefix}{next(_OWN)}"
            state.retries.asking[own] = (key, name)
            out.append(self._to_flow({"jsonrpc": "2.0", "id": own, **ask}))
        return out

    def _answered(self, msg: dict[str, Any]) -> list[Write]:
        """The host answered one of the server's questions: the retry once all are in."""
        retries = self.state.retries
        key = retries.asking[msg["id"]][0]
        result = msg.get("result")
        if not isinstance(result, dict):
            request = retries.open[key].request if key in retries.open else None
            retries.drop(key)
            error = msg.get("error") if isinstance(msg.get("error"), dict) else {}
            return [] if request is None else [self._to_flow(error_response(
                request["id"], error.get("code", -32603), f"the {LEGACY_ERA} host refused the server's request: "
                f"{error.get('message', 'no reason given')}", error.get("data")))]
        retry = retries.answer(msg["id"], result)
        return [] if retry is None else self._retry(retry)

    def _retry(self, retry: Retry) -> list[Write]:
        """The request again, with the host's answers and the server's state."""
        params = {k: v for k, v in retry.request["params"].items() if k not in ("inputResponses", "requestState")}
        if retry.answers:
            params["inputResponses"] = retry.answers
        if isinstance(retry.state, str):
            params["requestState"] = retry.state
        again = {**retry.request, "params": params}
        self.state.retries.sent[id_key(again["id"])] = again
        return [Send(PEER, dumps(again))]

    def _subscribe(self, msg: dict[str, Any], on: bool) -> list[Write]:
        """`resources/subscribe` / `unsubscribe`: the listen upstream again, with the host's URIs."""
        uri = get_path(msg, "params", "uri")
        uris = self.state.uris
        changed = isinstance(uri, str) and (uri not in uris) == on
        if changed and on and (len(uris) >= SUBSCRIBED_URIS or sum(map(len, uris)) + len(uri) > SUBSCRIBED_BYTES):
            return [self._to_flow(error_response(
                msg["id"], WAIT_FULL, f"{len(uris)} resources ({sum(map(len, uris))} bytes of URIs) are subscribed "
                "already, the most the era bridge carries in its one subscriptions/listen: unsubscribe from one "
                "first"))]
        if changed and on:
            uris.append(uri)
        elif changed:
            uris.remove(uri)
        return (self._relisten() if changed else []) + [self._to_flow({"jsonrpc": "2.0", "id": msg["id"], "result": {}})]

    def _relisten(self) -> list[Write]:
        """The host's notifications (2025-11-25: whatever the server declared it sends, its
        reminders among them, and the resources it subscribed to) as one listen upstream: a new one
        for a new filter, the old one cancelled (what the old one still delivers is not passed on)."""
        state = self.state
        if not self.streams or state.envelope is None:
            return []
        filters: dict[str, Any] = {}
        for name, cap in LIST_CHANGED.values():
            if get_path(state.caps, cap, "listChanged") is True:
                filters[name] = True
        if state.uris and get_path(state.caps, "resources", "subscribe") is True:
            filters["resourceSubscriptions"] = list(state.uris)
        if any(codec.read_capability(state.caps) is not None for codec in CODECS.values()):
            filters[REMINDERS_FILTER] = True  # a server that sends reminders sends its ambient ones there (spec §3)
        meta = {**state.envelope, **({LOG_LEVEL_KEY: state.level} if state.level is not None else {})}
        out = []
        if state.listen is not None:
            self.own.pop(state.listen, None)
            out.append(Send(PEER, dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": state.listen}})))
        state.listen = None
        if filters or state.level is not None:
            out.append(self._call(LISTEN_METHOD, {"notifications": filters, "_meta": meta}))
            state.listen = next(reversed(self.own))
        return out

    def _from(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        msg_id = msg.get("id")
        if "method" not in msg and isinstance(msg_id, str) and msg_id.startswith(self._prefix):
            if self.own.pop(msg_id, None) == "server/discover":
                return self._discovered(msg)
            if msg_id == self.state.listen:
                self.state.listen = None
            return []  # a listen ended (or refused): the host asked for none, nothing to answer
        meta = params_meta(msg)
        if isinstance(meta, dict) and SUBSCRIPTION_KEY in meta:  # a listen stream's (the acknowledgement too)
            current = self.state.listen is not None and meta[SUBSCRIPTION_KEY] == self.state.listen
            return [Forward(HOST, line)] if current and msg.get("method") != ACK_METHOD else []
        if msg.get("method") == "notifications/cancelled" and get_path(msg, "params", "requestId") == self.state.listen:
            self.state.listen = None  # the server ended the stream (stdio)
            return []
        request = self.state.retries.sent.pop(id_key(msg_id), None) if "method" not in msg else None
        if get_path(msg, "result", "resultType") == "input_required":  # a request of the server's, in 2026-07-28
            if request is not None:
                return self._ask_host(id_key(msg_id), request, msg["result"])
            return [self._to_flow(unbridged(msg_id, "input_required results",
                                            "server-to-client requests are not carried to a 2025-11-25 host over "
                                            "HTTP yet", host=LEGACY_ERA, server=MODERN_ERA))]
        return [Forward(HOST, line)]

    def _discovered(self, msg: dict[str, Any]) -> list[Write]:
        """`initialize`'s answer from discover's (2025-11-25, the server's own serverInfo), then what waited."""
        state = self.state
        asked, state.initialize = state.initialize, None
        held, state.held, state.held_bytes = state.held, [], 0
        assert asked is not None
        result = msg.get("result")
        if not isinstance(result, dict):
            error = msg.get("error") if isinstance(msg.get("error"), dict) else {}
            why = f"the {MODERN_ERA} server refused server/discover: {error.get('message', 'no reason given')}"
            state.envelope = None
            return [self._to_flow(error_response(asked["id"], error.get("code", -32603), why, error.get("data")))]
        info = get_path(result, "_meta", SERVER_INFO_KEY)
        answer: dict[str, Any] = {"protocolVersion": LEGACY_ERA, "capabilities": result.get("capabilities", {}),
                                  "serverInfo": info if isinstance(info, dict) else {"name": "unknown", "version": ""}}
        if isinstance(result.get("instructions"), str):
            answer["instructions"] = result["instructions"]
        caps = result.get("capabilities")
        state.caps = caps if isinstance(caps, dict) else {}
        out = [self._to_flow({"jsonrpc": "2.0", "id": asked["id"], "result": answer}), *self._relisten()]
        for waiting in held:
            out += self._toward(waiting, dumps(waiting))
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


#: The bridge for a server of each era (`RouteSettings.bridged_server_era`).
BRIDGES: dict[str, type[EraLayer]] = {LEGACY_ERA: LegacyServer, MODERN_ERA: ModernServer}
