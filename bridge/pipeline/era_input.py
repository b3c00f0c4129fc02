"""Server→client requests across the era bridge (issue 21, point 2), sans-I/O: a 2025-11-25 server
asks its client (`sampling/createMessage`, `elicitation/create`, `roots/list`) with a JSON-RPC
request of its own; a 2026-07-28 server answers the client's request with an `input_required`
result instead, and the client retries that request with `inputResponses` (and the opaque
`requestState`).

`Suspended` is the 2026-07-28-host side (the server asks, the host's request in flight is answered
`input_required`, its retry answers the server); `Retries` the 2025-11-25-host side (the server's
`input_required` becomes requests to the host, whose answers make the retry). Pure tables: the
era bridge turns what they say into writes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The requests a server may make of its client, and the client capability each needs.
INPUT_METHODS = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
#: The one key of the `inputRequests` the bridge makes of a 2025-11-25 server's request.
INPUT_KEY = "request"


def declared(caps: Any, method: str) -> bool:
    return isinstance(caps, dict) and isinstance(caps.get(INPUT_METHODS[method]), dict)


def input_required(request: dict[str, Any], state: str) -> dict[str, Any]:
    """The 2026-07-28 result that carries the server's ``request`` to the host."""
    ask = {"method": request["method"], **({"params": request["params"]} if "params" in request else {})}
    return {"resultType": "input_required", "inputRequests": {INPUT_KEY: ask}, "requestState": state}


class Suspended:
    """2026-07-28 host, 2025-11-25 server: the host's requests answered `input_required` while the
    server's own request waits (by the state token the bridge minted), and the ids under which
    the host retried them (the server's answer goes back under the retry's id)."""

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[Any, Any]] = {}  # token → (the host request's id key, the server's request id)
        self._keys: dict[Any, int] = {}  # the host requests suspended now → how many of their tokens wait
        self.rebound: dict[Any, Any] = {}  # the host request's id key → the id of its retry

    def carrier(self, asked: dict[Any, str], came_on: Any = None) -> Any:
        """The host request the server's request belongs to: ``came_on``, the request on whose
        answer stream it came (HTTP), else the newest in flight not already suspended (stdio tells
        no more), or None."""
        if came_on in asked and not self.suspended(came_on):
            return came_on
        free = [key for key in asked if not self.suspended(key)]
        return free[-1] if free else None

    def suspend(self, token: str, key: Any, server_id: Any) -> None:
        """Request ``key`` is answered `input_required` under ``token`` for the server's request ``server_id``."""
        self.waiting[token] = (key, server_id)
        self._keys[key] = self._keys.get(key, 0) + 1

    def suspended(self, key: Any) -> bool:
        """Request ``key`` was answered `input_required` and the host has not retried it yet (a
        lookup: asked for every request in flight each time the server asks something)."""
        return key in self._keys

    def host_id(self, key: Any) -> Any:
        return self.rebound.get(key, key[1])

    def resume(self, token: Any, retry_id: Any) -> tuple[Any, Any] | None:
        """A retry that carries ``token``: (its request's key, the server's request id), now answered."""
        found = self.waiting.pop(token, None) if isinstance(token, str) else None
        if found is not None:
            self.rebound[found[0]] = retry_id
            left = self._keys[found[0]] - 1
            if left:
                self._keys[found[0]] = left
            else:
                del self._keys[found[0]]
        return found



@dataclass
class Retry:
    """A host request a 2026-07-28 server answered `input_required`: the request as sent, the
    server's state, and the host's answers so far to the requests it was asked."""

    request: dict[str, Any]
    state: Any
    asked: set[str]
    answers: dict[str, Any] = field(default_factory=dict)


class Retries:
    """2025-11-25 host, 2026-07-28 server: the requests in flight (as sent, for a retry), and what
    each `input_required` is waiting on (the bridge's request id → (host request key, input key))."""

    def __init__(self) -> None:
        self.sent: dict[Any, dict[str, Any]] = {}
        self.open: dict[Any, Retry] = {}
        self.asking: dict[str, tuple[Any, str]] = {}

    def answer(self, own: str, result: dict[str, Any]) -> Retry | None:
        """The host answered request ``own``: the retry, once every answer is in."""
        key, name = self.asking.pop(own)
        retry = self.open.get(key)
        if retry is None:
            return None
        retry.answers[name] = result
        if set(retry.answers) != retry.asked:
            return None
        return self.open.pop(key)

    def drop(self, key: Any) -> None:
        """Request ``key`` is over (answered, or refused): nothing waits for it any more."""
        self.open.pop(key, None)
        for own in [o for o, (k, _) in self.asking.items() if k == key]:
            del self.asking[own]
