"""What every piece of reminder state is keyed by (spec §10, §12): the one place that says so.

A `Scope` names the owner of some state: one stdio (or WebSocket) connection, one MCP session
(`Mcp-Session-Id`), one A2A task, one identity the route's rules name (a 2026-07-28 request has no
session), or one request that is nobody's beyond its own answer.  Every key the proxy writes state
under (budget buckets, queued reminders, session records, outbox rows and cursors) is
``scope.key(what)``, so two scopes never reach the same state, whatever ids clients send: the
kind and the route are part of every key, and ids a client chose are digested (an
`Mcp-Session-Id` or an `Authorization` header is a credential of a sort, and any id may be huge).

Transports make scopes when they make a flow (`Flow(scope=...)`); flows derive the scopes of what
they hold (`within`: an ACP `sessionId` inside its connection; `task`: an A2A task of the route).
Nothing else invents a key.
"""
from __future__ import annotations

import functools
import hashlib
import secrets
from typing import Any, NamedTuple

CONNECTION = "connection"  # one stdio or WebSocket connection
MCP_SESSION = "mcp-session"  # one MCP 2025-11-25 session, by its Mcp-Session-Id
TASK = "task"  # one A2A task of a route
IDENTITY = "identity"  # a request with no session, keyed by what the route's rules name (a header)
REQUEST = "request"  # one request that is its own session: its state ends with its answer
ACP_SESSION = "acp-session"  # one ACP sessionId, within its connection
#: The stdio transport's one connection per route: its state (the outbox) outlives a proxy restart.
STDIO = "stdio"
#: How much of a client's id a scope shows (an error's `data.scope`, the console's gauges).
SHOWN_CHARS = 64


def digest(*parts: str) -> str:
    """32 hex digits of SHA-256 over ``parts``: bounded, printable, and no way back to the id."""
    joined = "\0".join(parts)
    return _short_digest(joined) if len(joined) <= _CACHED_CHARS else _digest(joined)


def _digest(joined: str) -> str:
    return hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:32]


#: the names digested again and again (a connection's sessions, a route's tasks) are short; a long
#: one is digested each time, so the cache stays bounded in bytes whatever ids clients send
_CACHED_CHARS = 256
_short_digest = functools.lru_cache(maxsize=4096)(_digest)


class Scope(NamedTuple):
    """The owner of some reminder state.  Make one with the constructors below, never by hand.

    ``id``: what keys use (a digest, or an id the proxy made itself); ``shown``: what a user may be
    shown of it (the id a client gave for its own ACP session or A2A task; a digest's first digits
    for a credential); ``parent``: the scope this one lives in (an ACP session's connection).
    """

    route: str
    kind: str
    id: str
    shown: str
    parent: "Scope | None" = None

    # -- the ways to make one ----------------------------------------------------------------
    @classmethod
    def connection(cls, route: str, name: str | None = None) -> "Scope":
        """A connection: ``name`` when its state must outlive the process (`STDIO`), else a fresh id."""
        made = name or secrets.token_hex(8)
        return cls(route, CONNECTION, made, made)

    @classmethod
    def request(cls, route: str) -> "Scope":
        """A request that is its own session: a fresh id, so nothing else ever shares its state."""
        made = secrets.token_hex(8)
        return cls(route, REQUEST, made, made)

    @classmethod
    def mcp_session(cls, route: str, session_id: str) -> "Scope":
        hashed = digest(MCP_SESSION, session_id)
        return cls(route, MCP_SESSION, hashed, hashed[:12])

    @classmethod
    def identity(cls, route: str, rule: str, value: str) -> "Scope":
        """A request with no session, keyed by the value of what ``rule`` names (e.g. `header:authorization`)."""
        hashed = digest(IDENTITY, rule, value)
        return cls(route, IDENTITY, hashed, hashed[:12])

    @classmethod
    def task(cls, route: str, task_id: Any) -> "Scope":
        """An A2A task: the remote agent names it, and every request of the route reaches it by that name."""
        return _task(cls, route, str(task_id))

    def within(self, kind: str, given: Any) -> "Scope":
        """What a client names inside this scope (an ACP `sessionId` on its connection): its own
        state, apart from the same name on any other connection."""
        return _within(self, kind, str(given))

    # -- keys ----------------------------------------------------------------------------------
    @property
    def base(self) -> str:
        """`route:kind:id`, with the parents' first: every key of this scope starts with it."""
        own = f"{self.kind}:{self.id}"
        return f"{self.parent.base}/{own}" if self.parent is not None else f"{self.route}:{own}"

    def key(self, what: str) -> str:
        """The key of ``what`` (e.g. `"budget"`, `"outbox:bridge://reminders"`) in this scope."""
        return f"{self.base}:{what}"

    @property
    def lasting(self) -> bool:
        """Whether state of this scope may outlive the request that made it (a request's dies with it)."""
        return self.kind != REQUEST

    def __str__(self) -> str:
        return self.base


#: A connection's sessions and a route's tasks are named again with every message: their scopes are
#: made once (immutable values, each a function of its arguments alone), the most recent kept.
@functools.lru_cache(maxsize=4096)
def _within(parent: Scope, kind: str, text: str) -> Scope:
    return Scope(parent.route, kind, digest(kind, text), text[:SHOWN_CHARS], parent)


@functools.lru_cache(maxsize=4096)
def _task(cls: type[Scope], route: str, given: str) -> Scope:
    return cls(route, TASK, digest(TASK, given), given[:SHOWN_CHARS])
