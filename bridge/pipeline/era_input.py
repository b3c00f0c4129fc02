"""Server→client requests across the era bridge (issue 21, point 2), sans-I/O: a 2025-11-25 server
asks its client (`sampling/createMessage`, `elicitation/create`, `roots/list`) with a JSON-RPC
request of its own; a 2026-07-28 server answers the client's request with an `input_required`
result instead, and the client retries that request with `inputResponses` (and the opaque
`requestState`).

`Suspended` is the 2026-07-28-host side (the server asks, the host's request in flight is answered
`input_required`, its retry answers the server); `Retries` the 2025-11-25-host side (the server's
`input_required` becomes requests to the host, whose answers make the retry). Pure tables: the
era bridge turns what they say into writes.

Both wait on a host that may never answer (a 2026-07-28 host need not retry; a 2025-11-25 one may
leave the bridge's request unanswered), so each entry has a deadline (`input_wait_s`, from the
clock the driver gives) and each table a bound in entries and bytes (`INPUT_WAITS`,
`INPUT_BYTES`): a host cannot make the bridge hold the server's requests, or its own, forever.
Entries are made with one fixed wait, so the oldest is always the first due: expiry pops from
the front.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bridge.jsonrpc import dumps, id_key

#: The requests a server may make of its client, and the client capability each needs.
INPUT_METHODS = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
#: The one key of the `inputRequests` the bridge makes of a 2025-11-25 server's request.
INPUT_KEY = "request"
#: What one connection may have waiting on the host's input at once, at most (as `HELD_MESSAGES`);
#: and the notifications kept for the retries meanwhile, at most as many.
INPUT_WAITS, INPUT_BYTES = 256, 4 << 20
PROGRESS = "notifications/progress"


def declared(caps: Any, method: str) -> bool:
    return isinstance(caps, dict) and isinstance(caps.get(INPUT_METHODS[method]), dict)


def input_required(request: dict[str, Any], state: str) -> dict[str, Any]:
    """The 2026-07-28 result that carries the server's ``request`` to the host."""
    ask = {"method": request["method"], **({"params": request["params"]} if "params" in request else {})}
    return {"resultType": "input_required", "inputRequests": {INPUT_KEY: ask}, "requestState": state}


class Waiting(NamedTuple):
    """A server's request carried to the host as `input_required`: the host request it answered
    (its id key), the server's request id and method, when it is given up, and its size (bytes)."""

    key: Any
    server_id: Any
    method: str
    deadline: float
    size: int


def size_of(*ids: Any) -> int:
    """What an entry holds, in bytes: the ids it keeps (a host chooses its ids, of any length)."""
    return sum(len(dumps(i)) for i in ids)


class Suspended:
    """2026-07-28 host, 2025-11-25 server: the host's requests answered `input_required` while the
    server's own request waits (by the state token the bridge minted), and the ids under which
    the host retried them (the server's answer goes back under the retry's id)."""

    def __init__(self) -> None:
        self.waiting: dict[str, Waiting] = {}  # token → what waits on the host's retry, oldest first
        self.bytes = 0  # their `Waiting.size`, for the bound
        self._keys: dict[Any, int] = {}  # the host requests suspended now → how many of their tokens wait
        self.rebound: dict[Any, Any] = {}  # the host request's id key → the id of its retry
        #: the server's notifications for a suspended request (its progress, its log lines), kept for
        #: the retry's stream (its request's key → them, in order), and their size
        self.held: dict[Any, list[tuple[dict[str, Any], int]]] = {}
        self.held_count = self.held_bytes = 0
        #: the host requests in flight that asked for progress: their progressToken (id key) → request
        #: key and back, and the token its retry asked for (None: none), once retried
        self.tokens: dict[Any, Any] = {}
        self.token_of: dict[Any, Any] = {}
        self.retokened: dict[Any, Any] = {}

    def full(self, size: int) -> bool:
        """No room for one more entry of ``size`` bytes (`INPUT_WAITS`, `INPUT_BYTES`)."""
        return len(self.waiting) >= INPUT_WAITS or self.bytes + size > INPUT_BYTES

    def carrier(self, asked: dict[Any, str], came_on: Any = None) -> Any:
        """The host request the server's request belongs to: ``came_on``, the request on whose
        answer stream it came (HTTP), else the newest in flight not already suspended (stdio tells
        no more), or None."""
        if came_on in asked and not self.suspended(came_on):
            return came_on
        free = [key for key in asked if not self.suspended(key)]
        return free[-1] if free else None

    def suspend(self, token: str, entry: Waiting) -> None:
        """Request ``entry.key`` is answered `input_required` under ``token`` for the server's request."""
        self.waiting[token] = entry
        self.bytes += entry.size
        self._keys[entry.key] = self._keys.get(entry.key, 0) + 1

    def suspended(self, key: Any) -> bool:
        """Request ``key`` was answered `input_required` and the host has not retried it yet (a
        lookup: asked for every request in flight each time the server asks something)."""
        return key in self._keys

    def host_id(self, key: Any) -> Any:
        return self.rebound.get(key, key[1])

    def resume(self, token: Any, retry_id: Any) -> Waiting | None:
        """A retry that carries ``token``: what waited on it, now answered."""
        found = self.waiting.pop(token, None) if isinstance(token, str) else None
        if found is not None:
            self.rebound[found.key] = retry_id
            self._release(found)
        return found

    def expired(self, now: float) -> list[Waiting]:
        """What the host did not retry by its deadline, out of the table (the oldest first)."""
        out = []
        while self.waiting:
            token, entry = next(iter(self.waiting.items()))
            if entry.deadline > now:
                break
            del self.waiting[token]
            self._release(entry)
            out.append(entry)
        return out

    def next_deadline(self) -> float | None:
        return next(iter(self.waiting.values())).deadline if self.waiting else None

    def hold(self, key: Any, msg: dict[str, Any], size: int) -> bool:
        """Keep ``msg`` (``size`` bytes) for the retry of suspended request ``key``: a progress
        notification in place of the one before (the latest says all). False: no room."""
        kept = self.held.setdefault(key, [])
        if msg.get("method") == PROGRESS:
            for i, (old, old_size) in enumerate(kept):
                if old.get("method") == PROGRESS:
                    del kept[i]
                    self.held_count -= 1
                    self.held_bytes -= old_size
                    break
        if self.held_count >= INPUT_WAITS or self.held_bytes + size > INPUT_BYTES:
            if not kept:
                del self.held[key]
            return False
        kept.append((msg, size))
        self.held_count += 1
        self.held_bytes += size
        return True

    def take_held(self, key: Any) -> list[dict[str, Any]]:
        """What was kept for request ``key`` (its retry came, or it is given up), out of the table."""
        kept = self.held.pop(key, [])
        self.held_count -= len(kept)
        self.held_bytes -= sum(size for _, size in kept)
        return [msg for msg, _ in kept]

    def asks_progress(self, key: Any, token: Any) -> None:
        """Host request ``key`` is in flight and asked for progress under ``token``."""
        token_key = id_key(token)
        if token_key is not None:
            self.tokens[token_key] = key
            self.token_of[key] = token_key

    def over(self, key: Any) -> None:
        """Host request ``key`` is over (answered, or cancelled): nothing of its progress stays."""
        token_key = self.token_of.pop(key, None)
        if token_key is not None:
            self.tokens.pop(token_key, None)
        self.retokened.pop(key, None)

    def _release(self, entry: Waiting) -> None:
        self.bytes -= entry.size
        left = self._keys[entry.key] - 1
        if left:
            self._keys[entry.key] = left
        else:
            del self._keys[entry.key]


@dataclass
class Retry:
    """A host request a 2026-07-28 server answered `input_required`: the request as sent, the
    server's state, the host's answers so far to the requests it was asked (the bridge's ids of
    those still unanswered: ``owns``), when it is given up, and its size (bytes)."""

    request: dict[str, Any]
    state: Any
    asked: set[str]
    answers: dict[str, Any] = field(default_factory=dict)
    owns: dict[str, tuple[str, str]] = field(default_factory=dict)  # the bridge's request id → (input key, method)
    deadline: float = 0.0
    size: int = 0


class Retries:
    """2025-11-25 host, 2026-07-28 server: the requests in flight (as sent, for a retry), and what
    each `input_required` is waiting on (the bridge's request id → (host request key, input key)),
    oldest first, bounded as `Suspended` is."""

    def __init__(self) -> None:
        self.sent: dict[Any, dict[str, Any]] = {}
        self.open: dict[Any, Retry] = {}
        self.asking: dict[str, tuple[Any, str]] = {}
        self.bytes = 0

    def full(self, size: int) -> bool:
        return len(self.open) >= INPUT_WAITS or self.bytes + size > INPUT_BYTES

    def wait(self, key: Any, retry: Retry) -> None:
        """Request ``key`` waits on the host's answers to what ``retry`` asks (its `owns`)."""
        self.open[key] = retry
        self.bytes += retry.size
        for own, (name, _) in retry.owns.items():
            self.asking[own] = (key, name)

    def answer(self, own: str, result: dict[str, Any]) -> Retry | None:
        """The host answered request ``own``: the retry, once every answer is in."""
        key, name = self.asking.pop(own)
        retry = self.open.get(key)
        if retry is None:
            return None
        retry.owns.pop(own, None)
        retry.answers[name] = result
        if set(retry.answers) != retry.asked:
            return None
        return self._pop(key)

    def drop(self, key: Any) -> Retry | None:
        """Request ``key`` is over (answered, or refused): nothing waits for it any more."""
        return self._pop(key) if key in self.open else None

    def expired(self, now: float) -> list[tuple[Any, Retry]]:
        """The requests whose host did not answer what it was asked by their deadline (oldest first)."""
        out = []
        while self.open:
            key, retry = next(iter(self.open.items()))
            if retry.deadline > now:
                break
            out.append((key, self._pop(key)))
        return out

    def next_deadline(self) -> float | None:
        return next(iter(self.open.values())).deadline if self.open else None

    def _pop(self, key: Any) -> Retry:
        retry = self.open.pop(key)
        self.bytes -= retry.size
        for own in retry.owns:
            self.asking.pop(own, None)
        return retry
