"""Era bridging the other way round (issue 21, point 2), sans-I/O: 2025-11-25 hosts in front of a
server that speaks only 2026-07-28 (`ModernServer`, the mirror of `bridge.pipeline.eras.LegacyServer`:
the flow above sees a 2025-11-25 server). Its table, `ModernState`: the host's `initialize` and
the envelope made of it, the one listen upstream, the requests kept for an `input_required` retry
(`era_input.Retries`), whose questions to the host wait at most `input_wait_s`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.mcp import (
    ACK_METHOD, CLIENT_CAPS_KEY, CLIENT_INFO_KEY, CODECS, LISTEN_METHOD, LOG_LEVEL_KEY, PROTOCOL_KEY,
    REMINDERS_FILTER, SERVER_INFO_KEY, SUBSCRIPTION_KEY, VERSION_HEADER, routing_headers,
)
from bridge.dialects.paths import get_path, params_meta
from bridge.jsonrpc import dumps, error_response, id_key, loads
from bridge.pipeline.commands import HOST, PEER, Forward, Send, Write
from bridge.pipeline.era_input import INPUT_METHODS, Retries, Retry, declared
from bridge.pipeline.era_layer import INPUT_EXPIRED, UNBRIDGED, WAIT_FULL, EraLayer, unbridged
from bridge.pipeline.era_listens import LIST_CHANGED

#: What a 2025-11-25 host may have subscribed to at once through the reverse bridge, at most: the
#: URIs ride every `subscriptions/listen` the bridge opens upstream.
SUBSCRIBED_URIS, SUBSCRIBED_BYTES = 1024, 1 << 20


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

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
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
        if method is None and isinstance(msg.get("id"), str) and msg["id"].startswith(self._prefix):
            if msg["id"] in state.retries.asking:
                return self._answered(msg)
            return []  # the answer to a request the bridge gave up (`_expire`): nothing waits for it
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
        retries = state.retries
        size = len(dumps(request)) + len(dumps(asks))
        if retries.full(size):
            why = (f"{len(retries.open)} requests ({retries.bytes} bytes) already wait for the {LEGACY_ERA} host's "
                   "answers to the server's requests, the most the era bridge holds for one session")
            self._gave_up("full", why, request.get("method", "?"))
            return [self._to_flow(error_response(request["id"], WAIT_FULL, f"the server's input request was not "
                                                 f"carried: {why}", {"hostEra": LEGACY_ERA, "serverEra": MODERN_ERA}))]
        retry = Retry(request, result.get("requestState"), set(asks), deadline=self.clock() + self.input_wait_s,
                      size=size)
        out = []
        for name, ask in asks.items():
            own = self._mint()
            retry.owns[own] = (name, ask["method"])
            out.append(self._to_flow({"jsonrpc": "2.0", "id": own, **ask}))
        retries.wait(key, retry)
        return self._timed(out)

    def _expire(self, now: float) -> list[Write]:
        """The requests whose host did not answer the server's questions within `input_wait_s`: the
        host is told the bridge withdrew them (`notifications/cancelled`), and its request gets the
        error that says why (the server keeps nothing: its state was in the retry that never came)."""
        out: list[Write] = []
        for _, retry in self.state.retries.expired(now):
            methods = ", ".join(dict.fromkeys(method for _, method in retry.owns.values()))
            why = (f"the {LEGACY_ERA} host did not answer {methods} (the {MODERN_ERA} server's input request) "
                   f"within {self.input_wait_s:g} s (input_wait_s)")
            self._gave_up("expired", why, methods)
            out += [self._to_flow({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                   "params": {"requestId": own, "reason": why}}) for own in retry.owns]
            out.append(self._to_flow(error_response(retry.request["id"], INPUT_EXPIRED, why, {
                "feature": methods, "waitedS": self.input_wait_s, "hostEra": LEGACY_ERA, "serverEra": MODERN_ERA})))
        return out

    def _next_deadline(self) -> float | None:
        return self.state.retries.next_deadline()

    def _answered(self, msg: dict[str, Any]) -> list[Write]:
        """The host answered one of the server's questions: the retry once all are in."""
        retries = self.state.retries
        key = retries.asking[msg["id"]][0]
        result = msg.get("result")
        if not isinstance(result, dict):
            dropped = retries.drop(key)
            request = dropped.request if dropped is not None else None
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
