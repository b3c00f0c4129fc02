"""The durable SQLite store behind both directions (stdlib sqlite3).

- `inbox`: every event (and gap) read from a server's outbox, keyed on (source, eventId), with
  a `delivered` flag.  A poll's events and its new cursor are written in **one transaction**, so
  the cursor never gets ahead of what is stored: a proxy that dies after the read re-reads, and
  the primary key makes the re-read a no-op.  Delivery to the host flips `delivered`; a restart
  delivers what was stored but not yet handed over.
- `cursors`: the position of each poll stream, per (source, channel).
- `served`: the proxy's own outbox (reminders it saw from a server), numbered by an
  AUTOINCREMENT sequence that never reuses a number, pruned after the retention window.

Times are epoch milliseconds passed in by the caller (the clock is injected upstream).
"""
from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Iterable
from pathlib import Path

#: The environment variable `--state-dir` sets; the default store lives there.
STATE_DIR_ENV = "REMINDER_BRIDGE_STATE_DIR"
STORE_NAME = "outbox.sqlite3"

_SCHEMA = """
create table if not exists meta (key text primary key, value text not null);
create table if not exists inbox (
    source text not null, event_id text not null, kind text not null, payload text not null,
    stored_ms integer not null, delivered integer not null default 0,
    primary key (source, event_id));
create index if not exists inbox_pending on inbox (source, delivered);
create table if not exists cursors (
    source text not null, channel text not null, cursor text, updated_ms integer not null,
    primary key (source, channel));
create table if not exists served (
    seq integer primary key autoincrement, outbox text not null, event_id text not null,
    created_ms integer not null, event text not null);
create index if not exists served_by_outbox on served (outbox, seq);
create table if not exists served_pruned (outbox text primary key, through integer not null);
"""


def state_dir() -> Path:
    """`--state-dir` (via REMINDER_BRIDGE_STATE_DIR), else $XDG_STATE_HOME/reminder-bridge, else
    ~/.local/state/reminder-bridge."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "reminder-bridge"


def default_path() -> Path:
    return state_dir() / STORE_NAME


class Store:
    """One SQLite file; safe to share between proxies (WAL, busy timeout), one writer at a time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0, check_same_thread=False)
        self.db.execute("pragma journal_mode=wal")
        self.db.execute("pragma synchronous=full")
        self.db.executescript(_SCHEMA)
        with self._tx():
            row = self.db.execute("select value from meta where key = 'store_id'").fetchone()
            if row is None:
                self.db.execute("insert into meta values ('store_id', ?)", (secrets.token_hex(6),))
        self.store_id: str = self.db.execute("select value from meta where key = 'store_id'").fetchone()[0]

    def close(self) -> None:
        self.db.close()

    def _tx(self) -> "_Tx":
        return _Tx(self.db)

    # -- pulled outboxes ---------------------------------------------------------------------
    def cursor(self, source: str, channel: str) -> str | None:
        row = self.db.execute("select cursor from cursors where source = ? and channel = ?",
                              (source, channel)).fetchone()
        return row[0] if row else None

    def accept(self, source: str, channel: str, items: Iterable[tuple[str, str, str]], cursor: str | None,
               now_ms: int) -> int:
        """Store a poll's (event_id, kind, payload) items and then its cursor, atomically; returns how
        many items were new.  A cursor of None leaves the stored one as it was."""
        with self._tx():
            new = 0
            for event_id, kind, payload in items:
                new += self.db.execute(
                    "insert or ignore into inbox (source, event_id, kind, payload, stored_ms) values (?, ?, ?, ?, ?)",
                    (source, event_id, kind, payload, now_ms)).rowcount
            if cursor is not None:
                self.db.execute(
                    "insert into cursors values (?, ?, ?, ?) on conflict (source, channel) do update "
                    "set cursor = excluded.cursor, updated_ms = excluded.updated_ms",
                    (source, channel, cursor, now_ms))
        return new

    def undelivered(self, source: str) -> list[tuple[int, str, str, str]]:
        """(rowid, event_id, kind, payload) not yet handed to the host, oldest first."""
        return self.db.execute(
            "select rowid, event_id, kind, payload from inbox where source = ? and delivered = 0 order by rowid",
            (source,)).fetchall()

    def mark_delivered(self, rowids: Iterable[int]) -> None:
        with self._tx():
            self.db.executemany("update inbox set delivered = 1 where rowid = ?", [(r,) for r in rowids])

    def prune_inbox(self, before_ms: int) -> int:
        """Forget delivered events stored before ``before_ms`` (older than any replay can reach)."""
        with self._tx():
            return self.db.execute("delete from inbox where delivered = 1 and stored_ms < ?", (before_ms,)).rowcount

    # -- the proxy's own outbox --------------------------------------------------------------
    def append_served(self, outbox: str, event_id: str, created_ms: int, event: str) -> int:
        with self._tx():
            return self.db.execute("insert into served (outbox, event_id, created_ms, event) values (?, ?, ?, ?)",
                                   (outbox, event_id, created_ms, event)).lastrowid or 0

    def newest_served(self, outbox: str) -> int:
        """The highest sequence number this outbox ever used (pruned ones included)."""
        row = self.db.execute("select max(seq) from served where outbox = ?", (outbox,)).fetchone()
        return max(row[0] or 0, self.pruned_through(outbox))

    def pruned_through(self, outbox: str) -> int:
        row = self.db.execute("select through from served_pruned where outbox = ?", (outbox,)).fetchone()
        return row[0] if row else 0

    def read_served(self, outbox: str, after: int, floor_ms: int, limit: int) -> list[tuple[int, int, str]]:
        """(seq, created_ms, event) after ``after`` and created at or after ``floor_ms``, oldest first."""
        return self.db.execute("select seq, created_ms, event from served where outbox = ? and seq > ? "
                               "and created_ms >= ? order by seq limit ?", (outbox, after, floor_ms, limit)).fetchall()

    def skipped_served(self, outbox: str, after: int, floor_ms: int) -> bool:
        """Whether events after ``after`` exist that ``floor_ms`` (a reader's maxAgeMs) leaves out."""
        return self.db.execute("select 1 from served where outbox = ? and seq > ? and created_ms < ? limit 1",
                               (outbox, after, floor_ms)).fetchone() is not None

    def prune_served(self, outbox: str, before_ms: int) -> int:
        """Drop events created before ``before_ms``; readers whose cursor is older learn of the gap."""
        with self._tx():
            row = self.db.execute("select max(seq) from served where outbox = ? and created_ms < ?",
                                  (outbox, before_ms)).fetchone()
            if not row or row[0] is None:
                return 0
            through = row[0]
            gone = self.db.execute("delete from served where outbox = ? and seq <= ?", (outbox, through)).rowcount
            self.db.execute("insert into served_pruned values (?, ?) on conflict (outbox) do update "
                            "set through = max(through, excluded.through)", (outbox, through))
            return gone


class _Tx:
    """`with store._tx():` = one IMMEDIATE transaction, committed on success, rolled back on error."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("begin immediate")
        return self.db

    def __exit__(self, kind, exc, tb) -> None:
        self.db.execute("commit" if kind is None else "rollback")
