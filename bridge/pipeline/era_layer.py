"""What the era bridge's two directions share (issue 21, point 2), sans-I/O: `EraLayer`, the layer
below the MCP flow that `bridge.pipeline.eras.LegacyServer` (2026-07-28 hosts, a 2025-11-25
server) and `bridge.pipeline.era_reverse.ModernServer` (the other way round) build on: frames split
and parsed, the pass-through of a host of the server's era, the bridge's own ids and requests, the
wait for the upstream handshake, and the timer of what waits on the host's input (`wake`).
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from bridge.defaults import ROUTE
from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.mcp import LISTEN_METHOD
from bridge.jsonrpc import dumps, error_response, loads
from bridge.pipeline.commands import HOST, PEER, Forward, Send, Wakeup, Write
from bridge.telemetry import Recorder

#: -32601 (method not found) for what has no counterpart in the other era.
UNBRIDGED = -32601
#: What may wait for the upstream handshake (`initialize`, or `server/discover`), at most: a host
#: that floods while it is under way gets errors for its requests, not the proxy's memory.
HELD_MESSAGES, HELD_BYTES = 256, 4 << 20
#: the JSON-RPC error for a request the wait had no room left for
WAIT_FULL = -32000
#: the JSON-RPC error for a request given up because the host did not answer in time (MCP's request timeout)
INPUT_EXPIRED = -32001
_OWN = itertools.count(1)


def unbridged(msg_id: Any, feature: str, why: str = "", host: str = MODERN_ERA,
              server: str = LEGACY_ERA) -> dict[str, Any]:
    """The error for what the bridge cannot carry: it names the feature and both eras."""
    message = f"{feature} is not bridged between a {host} host and a {server} server"
    return error_response(msg_id, UNBRIDGED, message + (f": {why}" if why else ""),
                          {"feature": feature, "hostEra": host, "serverEra": server})


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
                 streams: bool = False, *, input_wait_s: float = ROUTE.input_wait_s,
                 clock: Callable[[], float] | None = None):
        self.host_era = host_era
        self.era = era
        self.recorder = recorder
        self.streams = streams
        #: how long what waits on the host's input (`era_input`) waits, on ``clock`` (the transport's)
        self.input_wait_s = input_wait_s
        self.clock = clock or time.monotonic
        self.through = False  # the host speaks the server's era (`host_era` auto): every frame passes
        self.own: dict[str, str] = {}  # the bridge's own requests in flight: own id → method
        self.came_on: Any = None  # where the server's message at hand came (`from_server`)
        self._prefix = f"rb-era-{id(self):x}-"
        self._asked: float | None = None  # the earliest wakeup the transport holds for us

    def toward_server(self, data: bytes, lasting: bool = False) -> list[Write]:
        """What to write for ``data`` (whole lines the flow wrote toward the server); ``lasting``:
        the flow's `Forward.lasting`, kept for what passes unread (a host of the server's era)."""
        return self._each(data, PEER, self._toward, lasting)

    def from_server(self, data: bytes, came_on: Any = None) -> list[Write]:
        """What to write for ``data`` (whole lines from the server): up to the flow, or back.
        ``came_on``: where it came (HTTP): `GET_STREAM`, or the id of the request on whose answer
        stream; None: the one channel there is (stdio), which tells no more."""
        self.came_on = came_on
        return self._each(data, HOST, self._from)

    def _each(self, data: bytes, to: str, handle: Callable[[dict[str, Any], bytes], list[Write]],
              lasting: bool = False) -> list[Write]:
        out: list[Write] = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                msg = None if self.through else loads(line)
            except ValueError:
                msg = None
            out += handle(msg, line) if isinstance(msg, dict) else [Forward(to, line, lasting=lasting)]
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

    def wake(self, now: float) -> list[Write | Wakeup]:
        """The transport's timer fired (it asked with `Wakeup`): what waited on the host's input past
        `input_wait_s` is given up, each side told why; the next `Wakeup` when more waits."""
        self._asked = None
        return self._timed(self._expire(now))

    def _timed(self, out: list[Any]) -> list[Any]:
        """``out``, and a `Wakeup` when something now waits on the host that is due before the timer
        the transport holds for the bridge (the first thing due: entries keep their order)."""
        at = self._next_deadline()
        if at is not None and (self._asked is None or at < self._asked):
            self._asked = at
            out.append(Wakeup(at))
        return out

    def _gave_up(self, reason: str, why: str, method: str) -> None:
        """What waited on the host is given up (``reason``: expired | full): counted and logged."""
        if self.recorder is not None:
            self.recorder.era_input_given_up(reason)
            self.recorder.warning("era_input_given_up", reason=reason, method=method, why=why)

    def _expire(self, now: float) -> list[Write]:
        raise NotImplementedError

    def _next_deadline(self) -> float | None:
        raise NotImplementedError

    def _toward(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        raise NotImplementedError

    def _from(self, msg: dict[str, Any], line: bytes) -> list[Write]:
        raise NotImplementedError

    def _mint(self, kind: str = "") -> str:
        """An id of the bridge's own (a request's, a state token's): no host or server has it."""
        return f"{self._prefix}{kind}{next(_OWN)}"

    def _call(self, method: str, params: dict[str, Any]) -> Write:
        own = self._mint()
        self.own[own] = method
        return Send(PEER, dumps({"jsonrpc": "2.0", "id": own, "method": method, "params": params}),
                    lasting=method == LISTEN_METHOD)

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
