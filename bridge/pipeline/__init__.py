"""Per-connection, sans-I/O pipelines: a frame in → frames out to the host and the peer.

Transports feed raw frames (one JSON-RPC message, no newline) to `Flow.from_host` /
`Flow.from_peer` and write what comes back.  A frame that needs no rewrite comes back as the
very same bytes object; only frames the pre-filter lets through are decoded.
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple

from bridge.model import Reminder, ReminderError
from bridge.prefilter import REMINDER_MARKERS, could_concern
from bridge.rules import RouteSettings
from bridge.telemetry import Recorder

HOST, PEER = "host", "peer"
DIALECTS = ("auto", "standard", "legacy", "none")
#: Prefix of every JSON-RPC id the proxy invents; no host or peer uses it (SPEC §8.6).
OWN_ID_PREFIX = "reminder-bridge:"
#: How often transports call `Flow.tick`, in seconds.
TICK = 0.25

Outgoing = list[tuple[str, Any]]


class Send(NamedTuple):
    to: str
    data: bytes


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def error_response(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def invalid_params(msg_id: Any, exc: ReminderError) -> dict[str, Any]:
    """-32602 naming the field and the rule; the message alone carries it (no `data`, as the vectors pin)."""
    return error_response(msg_id, -32602, str(exc))


class Flow:
    """Base of the per-protocol pipelines: framing, pre-filtering, batches, ids, stages.

    Subclasses implement `on_host` / `on_peer`, returning None for "forward unchanged" or a list
    of (destination, message) pairs, where a message of None stands for the incoming frame's own
    bytes (so a message forwarded after proxy-made ones stays byte-identical).
    """

    protocol = "?"

    def __init__(self, settings: RouteSettings | None = None, recorder: Recorder | None = None, *,
                 host_dialect: str | None = None, peer_dialect: str | None = None):
        self.settings = settings or RouteSettings()
        self.recorder = recorder or Recorder()
        self.stage = self.settings.stage
        self.host_dialect = host_dialect or self.settings.host_dialect
        self.peer_dialect = peer_dialect or self.settings.peer_dialect
        #: a configured dialect is never second-guessed by what the handshake says
        self.host_fixed = self.host_dialect != "auto"
        self.peer_fixed = self.peer_dialect != "auto"
        self.host_markers: tuple[bytes, ...] = REMINDER_MARKERS
        self.peer_markers: tuple[bytes, ...] = REMINDER_MARKERS
        #: ids of requests (by origin side) whose responses this flow must see
        self.awaiting: dict[str, dict[Any, Any]] = {HOST: {}, PEER: {}}
        self._next_id = 0

    # -- framing -------------------------------------------------------------------------------
    def from_host(self, frame: bytes) -> list[Send]:
        return self._handle(frame, HOST, PEER)

    def from_peer(self, frame: bytes) -> list[Send]:
        return self._handle(frame, PEER, HOST)

    def passes(self, data: bytes, origin: str) -> bool:
        """True when ``data`` (one frame, or a block of whole lines) can go on untouched, unparsed."""
        dest = PEER if origin == HOST else HOST
        # responses to requests the other side sent and we track must be looked at
        return not self.awaiting[dest] and not could_concern(data, self.host_markers if origin == HOST
                                                             else self.peer_markers)

    def _handle(self, frame: bytes, origin: str, dest: str) -> list[Send]:
        if self.passes(frame, origin):
            return [Send(dest, frame)]
        try:
            msg = json.loads(frame)
        except (ValueError, RecursionError):
            return [Send(dest, frame)]  # not JSON (or absurdly deep): not ours to judge
        if isinstance(msg, list):
            return self._batch(msg, frame, origin, dest)
        out = self._dispatch(msg, origin)
        if out is None:
            return [Send(dest, frame)]
        return [Send(to, frame if data is None else data if isinstance(data, bytes) else dumps(data))
                for to, data in out]

    def _dispatch(self, msg: Any, origin: str) -> Outgoing | None:
        if not isinstance(msg, dict):
            return None
        out = self.on_host(msg) if origin == HOST else self.on_peer(msg)
        if out is not None and self.stage == "observe":
            return None  # observe: decisions are counted and logged, the wire is untouched
        return out

    def _batch(self, batch: list[Any], frame: bytes, origin: str, dest: str) -> list[Send]:
        """JSON-RPC batches (MCP 2025-03-26): rewrite members, keep the rest of the array as it was."""
        results = [self._dispatch(item, origin) for item in batch]
        if all(r is None for r in results):
            return [Send(dest, frame)]
        forward: list[Any] = []
        back: list[Any] = []
        for item, result in zip(batch, results):
            if result is None:
                forward.append(item)
                continue
            for to, data in result:
                data = item if data is None else json.loads(data) if isinstance(data, bytes) else data
                (forward if to == dest else back).append(data)
        sends = [Send(dest, dumps(forward))] if forward else []
        if back:
            sends.append(Send(origin, dumps(back)))
        return sends

    def tick(self, now: float) -> list[Send]:
        """Called by the transport about every `TICK` seconds: frames the flow wants to send on its
        own (budget tokens returned for coalesced reminders, outbox polls).  ``now`` is monotonic."""
        out = self.on_tick(now)
        return [Send(to, data if isinstance(data, bytes) else dumps(data)) for to, data in out or ()]

    # -- helpers for subclasses ----------------------------------------------------------------
    def on_tick(self, now: float) -> Outgoing | None:
        return None

    def on_host(self, msg: dict[str, Any]) -> Outgoing | None:
        return None

    def on_peer(self, msg: dict[str, Any]) -> Outgoing | None:
        return None

    def own_id(self) -> str:
        self._next_id += 1
        return f"{OWN_ID_PREFIX}{self._next_id}"

    def expect_response(self, origin: str, msg: dict[str, Any], what: Any) -> None:
        """Remember that the response to ``msg`` (sent by ``origin``) must be seen by this flow."""
        if "id" in msg and msg["id"] is not None:
            self.awaiting[origin][_key(msg["id"])] = what

    def response_to(self, origin: str, msg: dict[str, Any]) -> Any:
        """What was remembered for the request this response answers (and forget it)."""
        if "method" in msg or "id" not in msg:
            return None
        return self.awaiting[origin].pop(_key(msg["id"]), None)

    def record(self, action: str, method: str | None, reminder: Reminder | None = None, *,
               source: str | None = None, target: str | None = None, why: str | None = None) -> None:
        self.recorder.reminder(action, protocol=self.protocol, method=method, reminder=reminder,
                               source=source, target=target, why=why)


def _key(msg_id: Any) -> Any:
    # 1 and "1" are different JSON-RPC ids; so are 1 and 1.0 on the wire, but Python hashes them alike.
    return (type(msg_id).__name__, msg_id)
