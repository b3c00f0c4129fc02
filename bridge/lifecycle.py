"""Per-session reminder lifecycle the proxy keeps itself (spec §4): dedupe by key, TTL counted
in completed prompt turns, `audit_only` never rendered.  Pure: no I/O, no clock.

Used two ways: to *hold* reminders for an agent with no reminder support (the proxy renders
them), and to *shadow* what it injected into a legacy agent, so it can tell a standard client
about dedupe and expiry that Harn never puts on the wire.

`ToolResultRides` is the MCP counterpart for a Claude Code channel host (spec §11): the channel
events that also ride the session's next tool result, each once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.lazy import lazily
from bridge.pending import PendingQueue

if TYPE_CHECKING:
    from bridge import model
    from bridge.model import Packed, Reminder
else:  # pydantic: loaded by the first reminder a route decodes (issue 23)
    model = lazily("bridge.model")


@dataclass(slots=True)
class Kept:
    """A reminder a session keeps, `Packed`, and the prompt turns it has left (None: no TTL).
    Slotted, as is `SessionReminders`: 10,000 sessions hold them (the bench's
    bytes-per-pending-reminder goal)."""

    packed: Packed
    turns_left: int | None

    @property
    def reminder(self) -> Reminder:
        return self.packed.reminder()


@dataclass
class Deduped:
    reminder_id: str
    dedupe_key: str
    dropped_ids: list[str]


@dataclass
class Expired:
    reminder_id: str
    phase: str
    at_turn: int


class SessionReminders:
    """The pending reminders of one session, in arrival order (a `PendingQueue` by arrival number,
    so the same id sent twice is kept twice, as the agent would)."""

    __slots__ = ("turn", "pending")

    def __init__(self, limit: int = 64):
        self.turn = 0
        self.pending: PendingQueue[Kept] = PendingQueue(limit)

    @property
    def limit(self) -> int:
        return self.pending.limit

    @limit.setter
    def limit(self, limit: int) -> None:
        self.pending.limit = limit

    def add(self, reminder: Reminder) -> tuple[Deduped | None, list[Expired]]:
        """Queue a reminder; a newer one with the same dedupe key replaces the older pending one.

        Returns the dedupe event (if any) and reminders pushed out by the pending limit.
        """
        put = self.pending.append(Kept(model.Packed.of(reminder), reminder.ttl_turns), dedupe=reminder.dedupe_key,
                                  size=model.size_at_most(reminder))
        deduped = None
        if put.deduped is not None:
            assert reminder.dedupe_key is not None
            deduped = Deduped(reminder.id, reminder.dedupe_key, [put.deduped.packed.id])
        return deduped, [Expired(gone.packed.id, "cleared", self.turn) for gone in put.evicted]

    def reminders(self) -> list[Reminder]:
        return [kept.reminder for kept in self.pending]

    def to_render(self) -> list[Reminder]:
        """What the model should see this turn: every pending reminder except `audit_only` ones."""
        return [kept.reminder for kept in self.pending if kept.packed.mode != "audit_only"]

    def end_turn(self) -> list[Expired]:
        """A `session/prompt` turn completed: count TTLs down and expire what ran out."""
        self.turn += 1
        expired = []
        for key, kept in self.pending.items():
            if kept.turns_left is not None:
                kept.turns_left -= 1
                if kept.turns_left <= 0:
                    self.pending.pop(key)
                    expired.append(Expired(kept.packed.id, "ttl_expired", self.turn))
        return expired

    def __len__(self) -> int:
        return len(self.pending)


class ToolResultRides:
    """Reminders sent to a Claude Code channel host that also ride its next tool result (route key
    `channel_also_tool_result`): Claude Code drops some channel events without a word, and the model
    reads every tool result.

    A reminder rides once: one is pending per id (a re-sent one replaces it), a newer one with the
    same dedupe key replaces the older, and one that rode never rides again (the last ``limit`` ids
    that rode are remembered).  At most ``limit`` wait (and `PENDING_BYTES`), the oldest pushed out
    first: a `PendingQueue` by id.  Owned by one session's flow, never shared.
    """

    def __init__(self) -> None:
        self.pending: PendingQueue[Reminder] = PendingQueue()  # by id, oldest first
        self.rode: dict[str, None] = {}  # ids that rode a tool result, oldest first

    def add(self, reminder: Reminder, limit: int) -> list[Reminder]:
        """Hold ``reminder`` for the next tool result; returns what ``limit`` pushed out, oldest first."""
        if reminder.id in self.rode:
            return []
        self.pending.limit = limit
        return self.pending.put(reminder.id, reminder, dedupe=reminder.dedupe_key,
                                size=model.size_at_most(reminder)).evicted

    def take(self, limit: int) -> list[Reminder]:
        """Everything pending, oldest first, for the tool result at hand: from now on, seen."""
        taken = self.pending.take()
        for reminder in taken:
            self.rode[reminder.id] = None
        while len(self.rode) > limit:
            del self.rode[next(iter(self.rode))]
        return taken

    def __len__(self) -> int:
        return len(self.pending)
