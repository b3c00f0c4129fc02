"""What a shared-state error means, decided in one place and by type (spec §12).

"Unavailable" is any error from shared state that is not a well-formed answer: Redis unreachable
or slow, credentials or ACL refused, out of memory, a read-only replica, still loading, scripts
gone, any other error reply, or an answer the proxy cannot read.  `FailoverState` asks `cause()`
about every exception its backend raises, on every operation, at start-up and in its probes, and
then does what ``on_unavailable`` says; nothing else decides it.

Why by type and never by message: redis-py parses the error code off the reply and raises a class
for it (``OOM`` → `OutOfMemoryError`, ``READONLY`` → `ReadOnlyError`), keeping only the rest of the
text, so a message check misses exactly the errors it was written for.  And why every error reply
counts, not a list of "outage" codes: a reply the proxy did not plan for (an ACL that refuses
`TIME` inside a script comes back as a plain ``ERR``) leaves the reminder as undecided as a refused
connection does, and the configured path is the only safe one.

The labels are short and stable, for metrics (``cause``), logs and `/readyz`.
"""
from __future__ import annotations

from functools import cache

#: every label `cause` returns, and what each means to an operator (the log line and /readyz say it)
CAUSES: dict[str, str] = {
    "connection": "Redis cannot be reached (refused, reset or closed connection)",
    "timeout": "Redis did not answer within timeout_ms",
    "auth": "Redis refused the credentials",
    "noperm": "the Redis ACL refuses a command the proxy needs (docs/deploy.md lists them)",
    "oom": "Redis is out of memory (maxmemory) and refuses writes",
    "readonly": "Redis is a read-only replica and refuses writes",
    "loading": "Redis is still loading its data set",
    "noscript": "Redis lost the proxy's scripts and did not take them again",
    "error": "Redis answered with an error",
    "malformed": "Redis answered in a shape the proxy cannot read",
}


class MalformedAnswer(Exception):
    """Redis answered, but not what the command or script gives (a proxy in between, a different
    server, a key of the wrong kind written by someone else): raised by the backend, never guessed."""


@cache
def _by_type() -> tuple[tuple[type[BaseException], str], ...]:
    """(exception class, label), most specific first: `isinstance` order matters, since redis-py
    derives `AuthenticationError` and `BusyLoadingError` from `ConnectionError`, and Python derives
    `TimeoutError` from `OSError`."""
    table: list[tuple[type[BaseException], str]] = [(MalformedAnswer, "malformed")]
    try:
        from redis import exceptions as r
    except ImportError:  # pragma: no cover - only a Redis URL builds a backend that raises these
        pass
    else:
        table += [(r.DataError, ""),  # the client refused our own arguments before asking Redis: a bug
                  (r.AuthenticationError, "auth"), (r.AuthorizationError, "auth"),
                  (r.BusyLoadingError, "loading"), (r.TimeoutError, "timeout"), (r.ConnectionError, "connection"),
                  (r.NoPermissionError, "noperm"), (r.OutOfMemoryError, "oom"), (r.ReadOnlyError, "readonly"),
                  (r.NoScriptError, "noscript"), (r.InvalidResponse, "malformed"), (r.RedisError, "error")]
    table += [(TimeoutError, "timeout"), (OSError, "connection")]
    return tuple(table)


def cause(exc: BaseException) -> str | None:
    """The label (a key of `CAUSES`) when ``exc`` means shared state is unavailable, or None when it
    is not a state failure at all (a bug in the proxy, which must not be mistaken for an outage)."""
    for kind, label in _by_type():
        if isinstance(exc, kind):
            return label or None
    return None


def describe(exc: BaseException, limit: int = 200) -> str:
    """``exc`` for a log line or /readyz: its class and shortened text, control characters escaped."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                   for c in text)
