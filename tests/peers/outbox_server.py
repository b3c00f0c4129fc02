"""An MCP server built with the official SDK that exposes a NimbleBrain-style notifications outbox.

    python -m tests.peers.outbox_server DB [--events] [--http PORT [--per-session]]

The outbox is one resource, read as `acme://notifications{?cursor,maxEvents,maxAgeMs}`, over a
SQLite file the test writes into (see `write_event`, `trim`): the way a real server keeps an
outbox table beside its own state.  Cursors are the table's row numbers.  Every read is logged
in the `reads` table so a test can see what the proxy asked for.

With `--per-session` (Streamable HTTP) the server keeps one outbox per MCP session: a read shows
only the events written for the `Mcp-Session-Id` it carries (`write_event(..., session=...)`), as
a server whose events are about one user does; a 2026-07-28 read, which has no session, those
written for its `Authorization` header.

With `--events` the server also advertises the MCP Events extension
(`io.modelcontextprotocol/events`, SEP-3415) and serves `events/list` and `events/poll` over
the same table (event name `acme.changed`).
"""
from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

from pydantic import ConfigDict

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver import Extension, MethodBinding, require_client_extension
from mcp_types import RequestParams

RESOURCE = "acme://notifications"
EVENTS_EXTENSION = "io.modelcontextprotocol/events"
SCHEMA = """
create table if not exists events (seq integer primary key autoincrement, event text not null, session text);
create table if not exists trimmed (through integer not null);
create table if not exists reads (n integer primary key autoincrement, how text not null, cursor text,
                                  max_events integer, max_age_ms integer, session text);
create table if not exists settings (key text primary key, value text not null);
"""


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, timeout=10)
    db.execute("pragma journal_mode=wal")
    db.executescript(SCHEMA)
    return db


# -- helpers the tests use to play the server's own application ------------------------------
def write_event(path: str, event: dict[str, Any], session: str | None = None) -> None:
    """An event for every reader, or (``session``, with `--per-session`) for that session's alone."""
    with connect(path) as db:
        db.execute("insert into events (event, session) values (?, ?)", (json.dumps(event), session))


def write_raw(path: str, text: str) -> None:
    """A row that is not a well-formed event at all (to show it is dropped alone)."""
    with connect(path) as db:
        db.execute("insert into events (event) values (?)", (text,))


def trim(path: str) -> None:
    """Forget every row written so far: a reader whose cursor is older gets `truncated`."""
    with connect(path) as db:
        through = db.execute("select coalesce(max(seq), 0) from events").fetchone()[0]
        db.execute("delete from events")
        db.execute("insert into trimmed values (?)", (through,))


def report_gap(path: str) -> None:
    """The server's own cap dropped events: its next answer to a reader with a cursor says `truncated`."""
    with connect(path) as db:
        db.execute("insert or replace into settings values ('gap', '1')")


def set_next_poll_ms(path: str, ms: int) -> None:
    with connect(path) as db:
        db.execute("insert or replace into settings values ('nextPollMs', ?)", (str(ms),))


def reads(path: str) -> list[tuple[str, str | None, int | None, int | None]]:
    with connect(path) as db:
        return db.execute("select how, cursor, max_events, max_age_ms from reads order by n").fetchall()


def cursors(path: str, session: str) -> list[str | None]:
    """The cursors of ``session``'s reads, in order: one past an event's row proves the reader stored
    it (a proxy moves its cursor only with what it stored)."""
    with connect(path) as db:
        return [c for (c,) in db.execute("select cursor from reads where session = ? order by n", (session,))]


def seq_of(path: str, event_id: str) -> int:
    with connect(path) as db:
        for seq, text in db.execute("select seq, event from events order by seq"):
            if json.loads(text).get("eventId") == event_id:
                return seq
    raise KeyError(event_id)


# -- the server ------------------------------------------------------------------------------
def poll(path: str, how: str, cursor: str | None, max_events: int | None, max_age_ms: int | None,
         session: str | None = None) -> dict[str, Any]:
    """One poll answer, shaped like SEP-3415's `events/poll` result and NimbleBrain's outbox read;
    with ``session`` (`--per-session`), over that session's events only."""
    with connect(path) as db:
        db.execute("insert into reads (how, cursor, max_events, max_age_ms, session) values (?, ?, ?, ?, ?)",
                   (how, cursor, max_events, max_age_ms, session))
        row = db.execute("select value from settings where key = 'nextPollMs'").fetchone()
        next_poll = int(row[0]) if row else 100
        newest = db.execute("select coalesce(max(seq), 0) from events").fetchone()[0]
        trimmed = db.execute("select coalesce(max(through), 0) from trimmed").fetchone()[0]
        if cursor is None:  # bootstrap: start from now
            return {"events": [], "cursor": str(max(newest, trimmed)), "truncated": False, "hasMore": False,
                    "nextPollMs": next_poll}
        after = int(cursor)
        gap = db.execute("delete from settings where key = 'gap'").rowcount > 0
        limit = max_events or 100
        rows = db.execute("select seq, event from events where seq > ? and (? is null or session = ?) "
                          "order by seq limit ?", (after, session, session, limit + 1)).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    events = []
    for _, text in rows:
        try:
            events.append(json.loads(text))
        except ValueError:
            events.append(text)  # served as it was written: the proxy must drop it alone
    return {"events": events, "cursor": str(rows[-1][0]) if rows else cursor, "truncated": gap or after < trimmed,
            "hasMore": more, "nextPollMs": next_poll}


class PollParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: dict[str, Any] | None = None
    cursor: str | None = None
    maxEvents: int | None = None
    maxAgeMs: int | None = None


class ListParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    cursor: str | None = None


class Events(Extension):
    """SEP-3415 poll delivery over the outbox table."""

    identifier = EVENTS_EXTENSION

    def __init__(self, path: str):
        self.path = path

    def methods(self):
        async def list_events(ctx, params: ListParams) -> dict[str, Any]:
            return {"resultType": "complete", "events": [{
                "name": "acme.changed", "description": "Something in acme changed.", "delivery": ["poll"],
                "inputSchema": {"type": "object"}, "payloadSchema": {"type": "object"}}]}

        async def poll_events(ctx, params: PollParams) -> dict[str, Any]:
            require_client_extension(ctx, EVENTS_EXTENSION)
            if params.name != "acme.changed":
                raise ValueError(f"unknown event {params.name}")
            return {"resultType": "complete",
                    **poll(self.path, "events/poll", params.cursor, params.maxEvents, params.maxAgeMs)}

        return [MethodBinding("events/list", ListParams, list_events),
                MethodBinding("events/poll", PollParams, poll_events)]


def build(path: str, events: bool = False, per_session: bool = False) -> MCPServer:
    server = MCPServer("outbox-demo", extensions=[Events(path)] if events else None)
    connect(path).close()

    @server.resource(RESOURCE + "{?cursor,maxEvents,maxAgeMs}", mime_type="application/json")
    def notifications(ctx: Context, cursor: str | None = None, maxEvents: int | None = None,
                      maxAgeMs: int | None = None) -> str:
        """The outbox: facts this server learned on its own."""
        headers = ctx.headers or {}
        session = (headers.get("mcp-session-id") or headers.get("authorization")) if per_session else None
        return json.dumps(poll(path, "resources/read", cursor, maxEvents, maxAgeMs, session))

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


if __name__ == "__main__":
    args = sys.argv[2:]
    app = build(sys.argv[1], "--events" in args, "--per-session" in args)
    if "--http" in args:  # Streamable HTTP at /mcp on that loopback port
        app.run("streamable-http", host="127.0.0.1", port=int(args[args.index("--http") + 1]))
    else:
        app.run("stdio")
