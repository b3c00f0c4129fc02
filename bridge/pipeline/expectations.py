"""What a flow expects to see come back: host requests whose responses it must look at, by id.

Typed and keyed by id so the pre-filter stays exact while one is open: a frame from the peer is
parsed only when it answers one of them (`answered_in`, a cheap look at its ids, no decoding), so
unrelated traffic passes untouched, unparsed, even while a `tools/call` is in flight.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bridge.jsonrpc import ids_in, one_id, wire_key


class Awaiting:
    """id key (`jsonrpc.id_key`) → what the response is for; and each id as the wire spells it."""

    __slots__ = ("_what", "_wire", "_opaque")

    def __init__(self) -> None:
        self._what: dict[Any, Any] = {}
        self._wire: dict[bytes, Any] = {}
        #: expected ids `ids_in` cannot name (a boolean): while any is open, every peer frame is looked at
        self._opaque = 0

    def __setitem__(self, key: Any, what: Any) -> None:
        if key not in self._what:
            wire = wire_key(key[1])
            if wire is None:
                self._opaque += 1
            else:
                self._wire[wire] = key
        self._what[key] = what

    def setdefault(self, key: Any, what: Any) -> Any:
        if key not in self._what:
            self[key] = what
        return self._what[key]

    def pop(self, key: Any, default: Any = None) -> Any:
        if key not in self._what:
            return default
        wire = wire_key(key[1])
        if wire is None:
            self._opaque -= 1
        else:
            self._wire.pop(wire, None)
        return self._what.pop(key)

    def answered_in(self, data: bytes) -> bool:
        """Whether ``data`` (a frame, or a block of lines) holds a response to an expected request."""
        if self._opaque:
            return True
        wire = self._wire
        if not wire:
            return False
        one = one_id(data)  # the usual: one message, read already by `Unanswered` (no generator)
        if one is not None:
            return one[0] == "response" and one[1] in wire
        return any(kind == "response" and key in wire for kind, key, _ in ids_in(data, requests=False))

    def __len__(self) -> int:
        return len(self._what)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._what)
