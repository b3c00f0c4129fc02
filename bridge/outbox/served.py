"""The proxy's own outbox: reminders a server pushed, served to a host that polls.

The host reads `<resource>{?cursor,maxEvents,maxAgeMs}` and gets
`{events, cursor, truncated, hasMore, nextPollMs?}`, exactly as a NimbleBrain host expects from
a server's outbox (landscape.md §3.3):

- no cursor: the bootstrap read; no events and a fresh cursor ("start from now");
- a cursor: events strictly after it, oldest first, at most `maxEvents` (default 100, at most
  1000), `hasMore` when the batch was cut;
- `maxAgeMs`: replay starts at the later of the cursor and now − maxAgeMs; events the bound
  skips set `truncated`;
- a stale cursor (its events were pruned after the retention window, or it comes from another
  store) sets `truncated` and replays what is still held.  Event ids are reminder ids, so a
  host that dedupes on them never sees one twice.

Cursors are `<store id>.<sequence>`: opaque to hosts, stable across proxy restarts.  Every call
names the outbox ``key`` it is about (its scope's: `ServedOutbox.key`), and a read sees that
outbox alone, whatever sequence a cursor names.
"""
from __future__ import annotations

import bisect
import itertools
import json
import sqlite3
from typing import Any
from urllib.parse import parse_qs

from bridge.dialects.mcp import SPEC_SHAPE
from bridge.jsonrpc import error_response
from bridge.model import Reminder
from bridge.outbox.events import to_event
from bridge.outbox.store import Store
from bridge.state.scope import Scope

DEFAULT_MAX_EVENTS = 100
MAX_EVENTS = 1000
#: The error a read gets on a request that is nobody's beyond its answer (no session, no identity).
NO_OWNER = -32600
#: What a 2026-07-28 result the proxy makes itself carries beside its payload.
MODERN_RESULT = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


class BadRead(ValueError):
    """A read the proxy answers with -32602."""


#: A reminder on its way into a served outbox: (arrival number, the reminder, when it came, epoch ms).
Item = tuple[int, Reminder, int]


class Behind(Exception):
    """A reminder not written because one before it failed: it is kept with it, in order."""


class Incoming:
    """Reminders on their way into one served outbox, in the order they came, through store trouble.

    Each is written at once, on the store's lane (so a read that comes after it sees it).  Once one
    fails, those behind it are not written either (`behind`, set and cleared on the lane) but kept
    with it, and one retry writes them all, in order, once no first write is still under way.  At
    most ``limit`` are kept: beyond it the oldest go (never those a retry is writing)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.kept: list[Item] = []  # in arrival order
        self.retrying = 0  # how many of `kept` a retry writes now
        self.first_tries = 0
        self.behind = False
        self._arrivals = itertools.count()

    def arrive(self, reminder: Reminder, now_ms: int) -> tuple[Item, bool]:
        """The item for ``reminder``, and whether to write it now (else keep it behind the others)."""
        item = (next(self._arrivals), reminder, now_ms)
        if self.kept or self.retrying:
            return item, False
        self.first_tries += 1
        return item, True

    def write(self, outbox: "ServedOutbox", key: str, items: list[Item], retry: bool) -> None:
        """On the store's lane: ``items`` into outbox ``key``, unless they are behind a failed one."""
        if retry:
            self.behind = False
        elif self.behind:
            raise Behind("behind reminders the store could not take yet")
        try:
            outbox.capture(key, [(reminder, now_ms) for _, reminder, now_ms in items])
        except sqlite3.Error:
            self.behind = True
            raise

    def settled(self, items: list[Item], retry: bool, failed: bool) -> None:
        if retry:
            self.retrying = 0
            if not failed:
                self.kept = [item for item in self.kept if item not in items]
        else:
            self.first_tries -= 1

    def keep(self, items: list[Item]) -> list[Reminder]:
        """Keep ``items`` for the retry, in arrival order; returns the reminders the bound drops."""
        for item in items:
            bisect.insort(self.kept, item, key=lambda kept: kept[0])
        over = len(self.kept) - self.limit
        if over <= 0:
            return []
        dropped = [reminder for _, reminder, _ in self.kept[self.retrying:self.retrying + over]]
        del self.kept[self.retrying:self.retrying + over]
        return dropped

    def due(self) -> list[Item] | None:
        """What a retry writes now: everything kept, once nothing else is being written."""
        if self.retrying or self.first_tries or not self.kept:
            return None
        self.retrying = len(self.kept)
        return list(self.kept)

    def abandon(self) -> list[tuple[Reminder, int]]:
        """The connection ended: what is kept and not being written, for one last try."""
        waiting = [(reminder, now_ms) for _, reminder, now_ms in self.kept[self.retrying:]]
        self.kept.clear()
        return waiting


class ServedOutbox:
    def __init__(self, resource: str, retention_s: int, store: Store):
        self.resource = resource
        self.retention_ms = retention_s * 1000
        self.store = store

    def key(self, scope: Scope) -> str:
        """The outbox of ``scope``: what both halves of the outbox write into and read."""
        return scope.key(f"outbox:{self.resource}")

    def owns(self, uri: Any) -> bool:
        return isinstance(uri, str) and (uri == self.resource or uri.startswith(self.resource + "?"))

    def capture(self, key: str, items: list[tuple[Reminder, int]]) -> None:
        """Reminders (each with when it came, epoch ms) into outbox ``key``, in one transaction."""
        self.store.append_served(key, [(reminder.id, now_ms, _event(reminder, now_ms)) for reminder, now_ms in items])

    def move(self, key: str, rowid: int, reminder: Reminder, now_ms: int) -> int:
        """A pulled row's reminder into outbox ``key``, the row marked delivered in the same transaction."""
        return self.store.serve_pulled(key, rowid, reminder.id, now_ms, _event(reminder, now_ms))

    def listing(self) -> dict[str, Any]:
        """The `resources/list` entry."""
        return {"uri": self.resource, "name": "reminders", "title": "Reminders",
                "description": "Reminders this server pushed, as a notifications outbox. Read "
                               f"{self.resource}{{?cursor,maxEvents,maxAgeMs}}; a read without a cursor "
                               "starts from now.",
                "mimeType": "application/json"}

    def listed(self, response: dict[str, Any], modern: bool) -> dict[str, Any] | None:
        """`resources/list`: this outbox joins the server's last page (or is the only entry when the
        server has no resources at all); None when the response stays as it was."""
        listing = self.listing()
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") == -32601:
            result: dict[str, Any] = {"resources": [listing]}
            if modern:
                result.update(MODERN_RESULT)
            return {"jsonrpc": "2.0", "id": response.get("id"), "result": result}
        result = response.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("resources"), list) or result.get("nextCursor"):
            return None
        if not any(isinstance(r, dict) and r.get("uri") == listing["uri"] for r in result["resources"]):
            result["resources"].append(listing)
        return response

    def prune(self, key: str, now_ms: int) -> int:
        return self.store.prune_served(key, now_ms - self.retention_ms)

    # -- reads -------------------------------------------------------------------------------
    def read(self, key: str, uri: str, now_ms: int) -> dict[str, Any]:
        """The poll answer for one read of ``uri`` in outbox ``key`` (BadRead for malformed query
        parameters)."""
        params = _query(uri[len(self.resource):])
        max_events = _int(params, "maxEvents", DEFAULT_MAX_EVENTS, minimum=1)
        max_events = min(max_events, MAX_EVENTS)
        max_age = _int(params, "maxAgeMs", None, minimum=0)
        cursor = params.get("cursor") or None
        newest = self.store.newest_served(key)
        if cursor is None:
            return {"events": [], "cursor": self._cursor(newest), "truncated": False, "hasMore": False}
        after = self._position(cursor, newest)
        stale = after is None
        if after is None:
            after = 0
        truncated = stale or after < self.store.pruned_through(key)
        floor_ms = now_ms - max_age if max_age is not None else 0
        if floor_ms > 0 and self.store.skipped_served(key, after, floor_ms):
            truncated = True
        rows = self.store.read_served(key, after, floor_ms, max_events + 1)
        more = len(rows) > max_events
        rows = rows[:max_events]
        events = [json.loads(event) for _, _, event in rows]
        position = rows[-1][0] if rows else newest
        return {"events": events, "cursor": self._cursor(position), "truncated": truncated, "hasMore": more}

    def _cursor(self, seq: int) -> str:
        return f"{self.store.store_id}.{seq}"

    def _position(self, cursor: str, newest: int) -> int | None:
        """The sequence a cursor points at, or None when it is not one of this store's."""
        store_id, _, seq = cursor.rpartition(".")
        if store_id != self.store.store_id or not seq.isdigit():
            return None
        position = int(seq)
        return position if position <= newest else None


def no_owner(msg_id: Any, resource: str, route: str, identity: str | None) -> dict[str, Any]:
    """The answer to a read of the served outbox on a request that has no session to own it
    (MCP 2026-07-28): what to configure, or which header the request lacks."""
    if identity is not None:
        what = f"this request does not carry the {identity.partition(':')[2]} header the route's rules name"
    else:
        what = ("this request has no session to own it; name an identity that does in the rules: "
                f'routes.{route}.serve_outbox.identity = "header:<name>" (a header the upstream authenticates, '
                "such as authorization)")
    return error_response(msg_id, NO_OWNER, f"reminder-bridge: {resource} is kept per MCP session; {what}",
                          {"reason": "no session", "configure": f"routes.{route}.serve_outbox.identity"})


def _event(reminder: Reminder, now_ms: int) -> str:
    return json.dumps(to_event(reminder, SPEC_SHAPE.encode(reminder), now_ms), ensure_ascii=False)


def _query(rest: str) -> dict[str, str]:
    if not rest:
        return {}
    if not rest.startswith("?"):
        raise BadRead("unknown resource")
    try:
        parsed = parse_qs(rest[1:], keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise BadRead("the query is not name=value pairs joined by &") from None
    return {k: v[-1] for k, v in parsed.items()}


def _int(params: dict[str, str], key: str, default: int | None, minimum: int) -> Any:
    value = params.get(key)
    if value is None or value == "":
        return default
    if not value.isdigit() or int(value) < minimum:
        raise BadRead(f"{key} must be an integer >= {minimum} (got {value!r})")
    return int(value)
