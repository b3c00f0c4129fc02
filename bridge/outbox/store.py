"""The durable SQLite store behind both directions (stdlib sqlite3).

Every key here is a `Scope` key (`bridge/state/scope.py`): a source or an outbox belongs to one
connection, MCP session or identity, never to a route as a whole.

- `inbox`: every event (and gap) read from a server's outbox, keyed on (source, eventId), with
  a `delivered` flag.  A poll's events and its new cursor are written in **one transaction**, so
  the cursor never gets ahead of what is stored: a proxy that dies after the read re-reads, and
  the primary key makes the re-read a no-op.  `delivered` flips once the reminder is written to
  the host's connection; a restart delivers what was stored but not yet written.
- `cursors`: the position of each poll stream, per (source, channel).
- `served`: the proxy's own outbox (reminders it saw from a server), numbered by an
  AUTOINCREMENT sequence that never reuses a number, pruned after the retention window.

Each store runs its work on a thread of its own (`lane`), one call at a time, and waits at most
`BUSY_TIMEOUT_S` for a lock another process holds: a locked or broken store fails its own calls
quickly, and `health` says so (for /readyz and /metrics) until a call succeeds again.

Times are epoch milliseconds passed in by the caller (the clock is injected upstream).
"""
from __future__ import annotations

import functools
import os
import secrets
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from cachetools import TTLCache

from bridge.telemetry import register_collector

#: The environment variable `--state-dir` sets; the default store lives there.
STATE_DIR_ENV = "REMINDER_BRIDGE_STATE_DIR"
STORE_NAME = "outbox.sqlite3"
#: How long one call waits for a lock another process holds before it fails (and is retried later).
BUSY_TIMEOUT_S = 0.2

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


_T = TypeVar("_T")


def _watched(call: Callable[..., _T]) -> Callable[..., _T]:
    """A store call whose outcome `health` records: failing from its first error until a write
    succeeds (a reader is not blocked by another process's write lock, so a read proves nothing)."""
    writes = call.__name__ not in _READS

    @functools.wraps(call)
    def watched(self: "Store", *args: Any, **kwargs: Any) -> _T:
        try:
            result = call(self, *args, **kwargs)
        except sqlite3.Error as exc:
            self.health.failed(exc)
            raise
        if writes:
            self.health.succeeded()
        return result

    return watched


_READS = {"cursor", "undelivered", "newest_served", "pruned_through", "read_served", "skipped_served", "held"}


class Health:
    """Whether a store's calls succeed: since when they fail, why, and how often (counted)."""

    def __init__(self) -> None:
        self.failing_since: float | None = None
        self.reason = ""
        self.errors = 0
        self.retries = 0  # work the outbox keeps to try again (a row, a mark), counted by the add-on

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.reason = f"{type(exc).__name__}: {exc}"[:200]
        if self.failing_since is None:
            self.failing_since = time.time()

    def succeeded(self) -> None:
        self.failing_since = None


class Store:
    """One SQLite file; safe to share between proxies (WAL, busy timeout), one writer at a time."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.health = Health()
        #: the thread this store's calls run on, one at a time, apart from every other store's
        self.lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reminder-bridge-outbox")
        #: inbox rows handed to a flow in this process and not yet written or given back: no other
        #: flow of the same scope (a keeper after another, two requests of one identity) hands them
        #: over meanwhile
        self.claimed: set[int] = set()
        #: undelivered rows, whatever session they wait for, as the last prune counted them
        self.held_rows = 0
        #: when each source may start polling again (monotonic seconds), for flows that live one request each
        self._starts: TTLCache = TTLCache(maxsize=10_000, ttl=3600.0)
        register_collector(METRICS)
        _OPEN.add(self)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        self.db.execute("pragma journal_mode=wal")
        self.db.execute("pragma synchronous=full")
        self.db.executescript(_SCHEMA)
        with self._tx():
            row = self.db.execute("select value from meta where key = 'store_id'").fetchone()
            if row is None:
                self.db.execute("insert into meta values ('store_id', ?)", (secrets.token_hex(6),))
        self.store_id: str = self.db.execute("select value from meta where key = 'store_id'").fetchone()[0]

    def poll_start(self, source: str, now: float, every_s: float) -> float:
        """When ``source`` may start polling, at most once per ``every_s`` (monotonic seconds): ``now``
        (and it is taken) unless another start was less than ``every_s`` ago."""
        due = self._starts.get(source)
        if due is not None and now < due:
            return due
        self._starts[source] = now + every_s
        return now

    def next_start(self, source: str, now: float) -> float:
        """When ``source`` may start polling next (without taking it)."""
        return max(now, self._starts.get(source, now))

    def close(self) -> None:
        self.db.close()
        self.lane.shutdown(wait=False)

    def _tx(self) -> "_Tx":
        return _Tx(self.db)

    # -- pulled outboxes ---------------------------------------------------------------------
    @_watched
    def cursor(self, source: str, channel: str) -> str | None:
        row = self.db.execute("select cursor from cursors where source = ? and channel = ?",
                              (source, channel)).fetchone()
        return row[0] if row else None

    @_watched
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

    @_watched
    def undelivered(self, source: str) -> list[tuple[int, str, str, str]]:
        """(rowid, event_id, kind, payload) not yet handed to the host, oldest first."""
        return self.db.execute(
            "select rowid, event_id, kind, payload from inbox where source = ? and delivered = 0 order by rowid",
            (source,)).fetchall()

    @_watched
    def mark_delivered(self, rowids: Iterable[int]) -> None:
        with self._tx():
            self.db.executemany("update inbox set delivered = 1 where rowid = ?", [(r,) for r in rowids])

    @_watched
    def serve_pulled(self, outbox: str, rowid: int, event_id: str, created_ms: int, event: str) -> int:
        """A pulled row moved into a served outbox (a host that reads instead of listening), and
        marked delivered, in one transaction: it is in one place or the other, never both or none."""
        with self._tx():
            self.db.execute("update inbox set delivered = 1 where rowid = ?", (rowid,))
            return self.db.execute("insert into served (outbox, event_id, created_ms, event) values (?, ?, ?, ?)",
                                   (outbox, event_id, created_ms, event)).lastrowid or 0

    @_watched
    def prune_inbox(self, before_ms: int) -> tuple[int, int]:
        """Forget events stored before ``before_ms`` (older than any replay can reach), and cursors
        unused since: (delivered rows gone, undelivered rows given up on).  Undelivered rows are held
        for their own session only: one that never comes back loses them here, counted."""
        with self._tx():
            delivered = self.db.execute("delete from inbox where delivered = 1 and stored_ms < ?",
                                        (before_ms,)).rowcount
            abandoned = self.db.execute("delete from inbox where delivered = 0 and stored_ms < ?",
                                        (before_ms,)).rowcount
            self.db.execute("delete from cursors where updated_ms < ?", (before_ms,))
            return delivered, abandoned

    @_watched
    def held(self) -> int:
        """Undelivered rows, whatever session they wait for (the pending gauge)."""
        return self.db.execute("select count(*) from inbox where delivered = 0").fetchone()[0]

    # -- the proxy's own outbox --------------------------------------------------------------
    @_watched
    def append_served(self, outbox: str, events: Iterable[tuple[str, int, str]]) -> None:
        """(event_id, created_ms, event) each, in order, in one transaction."""
        with self._tx():
            self.db.executemany("insert into served (outbox, event_id, created_ms, event) values (?, ?, ?, ?)",
                                [(outbox, *event) for event in events])

    @_watched
    def newest_served(self, outbox: str) -> int:
        """The highest sequence number this outbox ever used (pruned ones included)."""
        row = self.db.execute("select max(seq) from served where outbox = ?", (outbox,)).fetchone()
        return max(row[0] or 0, self.pruned_through(outbox))

    @_watched
    def pruned_through(self, outbox: str) -> int:
        row = self.db.execute("select through from served_pruned where outbox = ?", (outbox,)).fetchone()
        return row[0] if row else 0

    @_watched
    def read_served(self, outbox: str, after: int, floor_ms: int, limit: int) -> list[tuple[int, int, str]]:
        """(seq, created_ms, event) after ``after`` and created at or after ``floor_ms``, oldest first."""
        return self.db.execute("select seq, created_ms, event from served where outbox = ? and seq > ? "
                               "and created_ms >= ? order by seq limit ?", (outbox, after, floor_ms, limit)).fetchall()

    @_watched
    def skipped_served(self, outbox: str, after: int, floor_ms: int) -> bool:
        """Whether events after ``after`` exist that ``floor_ms`` (a reader's maxAgeMs) leaves out."""
        return self.db.execute("select 1 from served where outbox = ? and seq > ? and created_ms < ? limit 1",
                               (outbox, after, floor_ms)).fetchone() is not None

    @_watched
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


#: every open store, for /readyz and /metrics
_OPEN: "weakref.WeakSet[Store]" = weakref.WeakSet()


def degraded_reason() -> str | None:
    """Why outbox stores fail their calls now (for /readyz), or None when every one is well."""
    failing = [s for s in list(_OPEN) if s.health.failing_since is not None]
    if not failing:
        return None
    return "; ".join(f"outbox store {str(s.path)!r} failing since "
                     f"{time.strftime('%H:%M:%S', time.localtime(s.health.failing_since))}: {s.health.reason} "
                     f"(its rows are kept and retried)" for s in failing)  # type: ignore[arg-type]


class _Metrics:
    """The stores' metric families, read from each open store's `Health` at every scrape (a
    prometheus_client collector: `bridge.telemetry.register_collector`)."""

    def collect(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stores = list(_OPEN)
        families = [
            GaugeMetricFamily("reminder_bridge_outbox_store_failing",
                              "1 while the outbox store's calls fail (locked by another process, disk full, ...).",
                              labels=("store",)),
            CounterMetricFamily("reminder_bridge_outbox_store_errors", "Outbox store calls that failed.",
                                labels=("store",)),
            GaugeMetricFamily("reminder_bridge_outbox_held",
                              "Pulled outbox events stored and not yet written to their own session (it may come "
                              "back), as last counted.", labels=("store",)),
            CounterMetricFamily("reminder_bridge_outbox_retries",
                                "Outbox work kept in memory to try again after the store failed it (a reminder to "
                                "serve, a row to mark delivered).", labels=("store",)),
        ]
        for s in stores:
            values = (1.0 if s.health.failing_since is not None else 0.0, s.health.errors, s.held_rows,
                      s.health.retries)
            for family, value in zip(families, values):
                family.add_metric([str(s.path)], value)
        return families


METRICS = _Metrics()


class _Tx:
    """`with store._tx():` = one IMMEDIATE transaction, committed on success, rolled back on error."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("begin immediate")
        return self.db

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None:
            self.db.execute("rollback")
            return
        try:
            self.db.execute("commit")
        except sqlite3.Error:  # a commit that failed leaves the transaction open: end it, then say so
            self.db.execute("rollback")
            raise
