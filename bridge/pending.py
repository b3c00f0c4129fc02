"""The one bounded queue of reminders waiting to go out: held by `coalesce` until tokens return,
kept for an ACP session the agent cannot take them, riding a channel host's next tool result,
waiting for an ACP agent's `initialize` answer, queued for an A2A task in this process.

Each is keyed as its owner needs (a reminder id, a dedupe key, an arrival number), in the order
the newest arrived, and bounded in number and in bytes.  An item under a key already held
replaces it; with a dedupe key, the newest of that key replaces the older one; past a bound the
oldest are pushed out (`put`), or, for a queue that refuses rather than forgets, the newcomer is
turned away (`room`).  Whatever leaves without being taken is handed back, for the owner to
count.  Pure: no I/O, no clock; the Redis-backed A2A queue follows the same rules in its script.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")

#: The most bytes a queue holds unless its owner says less: its count bound, at the trust
#: limits' defaults (64 reminders of at most 16 KiB), four times over.
PENDING_BYTES = 4 * 1024 * 1024


class Put(NamedTuple, Generic[T]):
    """What one `PendingQueue.put` let go, for the owner to count."""

    #: the item that was under the same key
    previous: T | None
    #: the item of another key with the same dedupe key
    deduped: T | None
    #: the oldest, pushed out by a bound, oldest first
    evicted: list[T]


class PendingQueue(Generic[T]):
    """Items by key, oldest first, at most ``limit`` of them and ``max_bytes`` (each weighs the
    ``size`` it was put with)."""

    __slots__ = ("limit", "max_bytes", "bytes", "_items", "_by_dedupe", "_arrivals")

    def __init__(self, limit: int = 64, max_bytes: int = PENDING_BYTES):
        self.limit = limit
        self.max_bytes = max_bytes
        self.bytes = 0
        # key → (item, dedupe, size), oldest first: a plain dict keeps insertion order, and a key put
        # again is popped first, so it goes last (an OrderedDict costs ~100 B more a reminder)
        self._items: dict[Hashable, tuple[T, str | None, int]] = {}
        self._by_dedupe: dict[str, Hashable] | None = None  # made at the first dedupe key: most queues have none
        self._arrivals = 0  # the key `append` gave last

    def room(self, key: Hashable, size: int = 0) -> str | None:
        """Why one more item under ``key`` would pass a bound (`count` or `bytes`), or None; one
        that replaces the item under its key adds no count."""
        held = self._items.get(key)
        if held is None and len(self._items) >= self.limit:
            return "count"
        if self.bytes + size - (held[2] if held is not None else 0) > self.max_bytes:
            return "bytes"
        return None

    def put(self, key: Hashable, item: T, *, dedupe: str | None = None, size: int = 0) -> Put[T]:
        """Hold ``item`` under ``key``, newest last; see `Put` for what it let go."""
        deduped = None
        if dedupe is not None and self._by_dedupe is not None:
            old = self._by_dedupe.get(dedupe)
            if old is not None and old != key:
                deduped = self.pop(old)
        previous = self.pop(key)
        self._items[key] = (item, dedupe, size)
        self.bytes += size
        if dedupe is not None:
            if self._by_dedupe is None:
                self._by_dedupe = {}
            self._by_dedupe[dedupe] = key
        evicted: list[T] = []
        while self._items and (len(self._items) > max(self.limit, 0) or self.bytes > self.max_bytes):
            evicted.append(self.pop(next(iter(self._items))))  # type: ignore[arg-type]
        return Put(previous, deduped, evicted)

    def append(self, item: T, *, dedupe: str | None = None, size: int = 0) -> Put[T]:
        """`put` under the next arrival number, for a queue that keeps what arrives twice twice
        (the same reminder id sent again is delivered again, as a list would); such a queue is
        keyed only so."""
        self._arrivals += 1
        return self.put(self._arrivals, item, dedupe=dedupe, size=size)

    def pop(self, key: Hashable) -> T | None:
        """The item under ``key``, out of the queue; None when there is none."""
        held = self._items.pop(key, None)
        if held is None:
            return None
        item, dedupe, size = held
        self.bytes -= size
        if dedupe is not None and self._by_dedupe is not None and self._by_dedupe.get(dedupe) == key:
            del self._by_dedupe[dedupe]
        return item

    def take(self) -> list[T]:
        """Every item, oldest first, and the queue emptied."""
        out = [item for item, _, _ in self._items.values()]
        self._items.clear()
        self._by_dedupe = None
        self.bytes = 0
        return out

    def items(self) -> list[tuple[Hashable, T]]:
        """(key, item) pairs, oldest first: a copy, so the owner may pop while it walks them."""
        return [(key, held[0]) for key, held in self._items.items()]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter([held[0] for held in self._items.values()])
