"""Per-session reminder lifecycle the proxy keeps itself (spec §4): dedupe by key, TTL counted
in completed prompt turns, `audit_only` never rendered.  Pure: no I/O, no clock.

Used two ways: to *hold* reminders for an agent with no reminder support (the proxy renders
them), and to *shadow* what it injected into a legacy agent, so it can tell a standard client
about dedupe and expiry that Harn never puts on the wire.

`ToolResultRides` is the MCP counterpart for a Claude Code channel host (spec §11): the channel
events that also ride the session's next tool result, each once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bridge.model import Reminder


@dataclass
class Held:
    reminder: Reminder
    turns_left: int | None


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


@dataclass
class SessionReminders:
    """The pending reminders of one session, in arrival order."""

    limit: int = 64
    turn: int = 0
    pending: list[Held] = field(default_factory=list)

    def add(self, reminder: Reminder) -> tuple[Deduped | None, list[Expired]]:
        """Queue a reminder; a newer one with the same dedupe key replaces older pending ones.

        Returns the dedupe event (if any) and reminders pushed out by the pending limit.
        """
        deduped = None
        if reminder.dedupe_key is not None:
            dropped = [h.reminder.id for h in self.pending if h.reminder.dedupe_key == reminder.dedupe_key]
            if dropped:
                self.pending = [h for h in self.pending if h.reminder.dedupe_key != reminder.dedupe_key]
                deduped = Deduped(reminder.id, reminder.dedupe_key, dropped)
        self.pending.append(Held(reminder, reminder.ttl_turns))
        overflow = []
        while len(self.pending) > self.limit:
            oldest = self.pending.pop(0)
            overflow.append(Expired(oldest.reminder.id, "cleared", self.turn))
        return deduped, overflow

    def reminders(self) -> list[Reminder]:
        return [h.reminder for h in self.pending]

    def to_render(self) -> list[Reminder]:
        """What the model should see this turn: every pending reminder except `audit_only` ones."""
        return [h.reminder for h in self.pending if h.reminder.mode != "audit_only"]

    def end_turn(self) -> list[Expired]:
        """A `session/prompt` turn completed: count TTLs down and expire what ran out."""
        self.turn += 1
        expired = []
        kept = []
        for held in self.pending:
            if held.turns_left is not None:
                held.turns_left -= 1
                if held.turns_left <= 0:
                    expired.append(Expired(held.reminder.id, "ttl_expired", self.turn))
                    continue
            kept.append(held)
        self.pending = kept
        return expired

    def __len__(self) -> int:
        return len(self.pending)


class ToolResultRides:
    """Reminders sent to a Claude Code channel host that also ride its next tool result (route key
    `channel_also_tool_result`): Claude Code drops some channel events without a word, and the model
    reads every tool result.

    A reminder rides once: one is pending per id (a re-sent one replaces it), a newer one with the
    same dedupe key replaces the older, and one that rode never rides again (the last ``limit`` ids
    that rode are remembered).  At most ``limit`` wait, the oldest pushed out first; each was
    admitted under the trust limits (`max_reminder_bytes`, `max_id_bytes`), so the whole is
    bounded in bytes too.  Owned by one session's flow, never shared.
    """

    def __init__(self) -> None:
        self.pending: dict[str, Reminder] = {}  # by id, oldest first
        self.rode: dict[str, None] = {}  # ids that rode a tool result, oldest first

    def add(self, reminder: Reminder, limit: int) -> list[Reminder]:
        """Hold ``reminder`` for the next tool result; returns what ``limit`` pushed out, oldest first."""
        if reminder.id in self.rode:
            return []
        self.pending.pop(reminder.id, None)
        if reminder.dedupe_key is not None:
            self.pending = {i: r for i, r in self.pending.items() if r.dedupe_key != reminder.dedupe_key}
        self.pending[reminder.id] = reminder
        pushed_out = []
        while len(self.pending) > limit:
            pushed_out.append(self.pending.pop(next(iter(self.pending))))
        return pushed_out

    def take(self, limit: int) -> list[Reminder]:
        """Everything pending, oldest first, for the tool result at hand: from now on, seen."""
        taken, self.pending = list(self.pending.values()), {}
        for reminder in taken:
            self.rode[reminder.id] = None
        while len(self.rode) > limit:
            del self.rode[next(iter(self.rode))]
        return taken

    def __len__(self) -> int:
        return len(self.pending)
