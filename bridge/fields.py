"""The canonical reminder's vocabulary (spec §2) without its model: field names, values, the
error a bad field raises, ids.  It imports no pydantic, so a route reaches its first answer
without it (issue 23: the cold start); `bridge.model` builds the `Reminder` on these and is
loaded by the first reminder a route decodes.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Literal

Propagate = Literal["all", "session", "none"]
RoleHint = Literal["system", "developer", "user_block", "ephemeral_cache"]
Mode = Literal["interrupt_immediate", "finish_step", "audit_only"]
Authority = Literal["contract", "corrective", "advisory"]

PROPAGATE_VALUES: tuple[str, ...] = ("all", "session", "none")
#: highest authority first: a peer's `roleHint` above its route's ceiling is lowered to it (spec §7)
ROLE_HINT_VALUES: tuple[str, ...] = ("system", "developer", "user_block", "ephemeral_cache")
ROLE_HINT_RANK: dict[str, int] = {hint: len(ROLE_HINT_VALUES) - i for i, hint in enumerate(ROLE_HINT_VALUES)}
MODE_VALUES: tuple[str, ...] = ("interrupt_immediate", "finish_step", "audit_only")
AUTHORITY_VALUES: tuple[str, ...] = ("contract", "corrective", "advisory")
SOURCE_VALUES: tuple[str, ...] = ("host", "provider", "hook", "bridge", "inherited")

#: The proxy's own `_meta` key for values a target wire cannot express (spec §2).
ORIGINAL_KEY = "reminder-bridge/original"
#: Marks lifecycle updates the proxy made up itself (spec §4).
SYNTHESIZED_KEY = "reminder-bridge/synthesized"


#: RFC 9562 §6.2 method 1: a counter in rand_a (12 bits) and the top 30 bits of rand_b, seeded
#: at random each new millisecond with its top bit clear (room for 2**41 ids in one millisecond)
#: and incremented for ids made in the same one; the 32 bits below it are fresh random per id.
_COUNTER_BITS = 42
_COUNTER_LOW = _COUNTER_BITS - 12
_LOW_MASK = (1 << _COUNTER_LOW) - 1
_VERSION = 0x7 << 76
_VARIANT = 0b10 << 62
_uuid7_lock = threading.Lock()
_uuid7_last_ms = 0
_uuid7_counter = 0


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): time-ordered, so ids sort by creation like Harn's.

    Monotonic within the process (§6.2): ids made in the same millisecond carry an increasing
    counter, and a clock that steps back keeps the last timestamp, so every id sorts after the
    one before it, as a string and as an integer.
    """
    global _uuid7_last_ms, _uuid7_counter
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits: 41 seed the counter, 32 fill rand_b
    with _uuid7_lock:
        if ms > _uuid7_last_ms:
            _uuid7_last_ms = ms
            counter = _uuid7_counter = rand >> 39
        else:  # same millisecond, or the clock went back: keep the last timestamp, count on
            ms = _uuid7_last_ms
            counter = _uuid7_counter = _uuid7_counter + 1
            if counter >> _COUNTER_BITS:  # counter exhausted: borrow the next millisecond (§6.2)
                ms = _uuid7_last_ms = ms + 1
                counter = _uuid7_counter = rand >> 39
    h = "%032x" % ((ms & 0xFFFF_FFFF_FFFF) << 80 | _VERSION | (counter >> _COUNTER_LOW) << 64 | _VARIANT
                   | (counter & _LOW_MASK) << 32 | rand & 0xFFFF_FFFF)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _uuid7_after_fork() -> None:
    global _uuid7_lock
    _uuid7_lock = threading.Lock()  # a lock held by another thread at fork() would never be released


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_uuid7_after_fork)


NO_VALUE: Any = object()


class ReminderError(ValueError):
    """An invalid reminder: names the wire field and the rule it broke, for JSON-RPC -32602 answers.

    ``str(exc)`` also quotes the bad value (shortened): that goes back to the client that sent it.
    ``loggable`` says the same without the value, only its JSON type and size, for logs and spans
    (a body or a secret must never reach them unless `telemetry.capture_bodies` is on).
    """

    def __init__(self, field: str, rule: str, value: Any = NO_VALUE):
        self.field = field
        has_value = value is not NO_VALUE
        #: the rule, and the value the sender sent when there is one (as the client is told)
        self.rule = f"{rule} (got {_short(value)})" if has_value else rule
        self.loggable = f"invalid reminder: `{field}` {rule}" + (f" (got {_describe(value)})" if has_value else "")
        super().__init__(f"invalid reminder: `{field}` {self.rule}")


#: (attribute, camelCase wire name, snake_case wire name), in the order encoders write them.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("id", "id", "id"),
    ("body", "body", "body"),
    ("tags", "tags", "tags"),
    ("dedupe_key", "dedupeKey", "dedupe_key"),
    ("ttl_turns", "ttlTurns", "ttl_turns"),
    ("preserve_on_compact", "preserveOnCompact", "preserve_on_compact"),
    ("propagate", "propagate", "propagate"),
    ("role_hint", "roleHint", "role_hint"),
    ("fired_at_turn", "firedAtTurn", "fired_at_turn"),
    ("mode", "mode", "mode"),
    ("source", "source", "source"),
    ("authority", "authority", "authority"),
    ("provider_id", "providerId", "provider_id"),
    ("originating_agent_id", "originatingAgentId", "originating_agent_id"),
)
CAMEL = {attr: camel for attr, camel, _ in FIELDS}
SNAKE = {attr: snake for attr, _, snake in FIELDS}
ATTR_BY_WIRE: dict[str, str] = {**{c: a for a, c, _ in FIELDS}, **{s: a for a, _, s in FIELDS}}

def _describe(value: Any) -> str:
    """A value's JSON type and size, never its text: `a string of 812 characters`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} character{'' if len(value) == 1 else 's'}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return f"an object with {len(value)} key{'' if len(value) == 1 else 's'}"
    return f"a {type(value).__name__}"


def _short(value: Any) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: The proxy's own JSON: compact, non-ASCII kept as is (as `json.dumps(..., ensure_ascii=False)`).
ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def json_bytes(value: Any) -> int:
    """The UTF-8 bytes ``value`` takes in the proxy's JSON (lone surrogates counted, not refused)."""
    text = ENCODER.encode(value)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
