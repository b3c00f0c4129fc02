"""The vocabulary between a flow and the transport that runs it (ARCHITECTURE.md, as in h11 and
mitmproxy): a flow is fed one frame (or a timer) and answers with these commands; the transport
performs them in order and never re-reads a frame to learn what the flow meant.

Every command that writes bytes has `to` and `data`; `Forward.data` is the incoming frame itself
(the same object, untouched), so a transport may write any of them alike.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

HOST, PEER = "host", "peer"


class Forward(NamedTuple):
    """Pass the frame being handled on to ``to``, byte for byte."""

    to: str
    data: bytes


class Receipt(NamedTuple):
    """What a transport reports back (`Flow.written`) once the `Send` carrying it is on the host's
    connection: ``owner`` (the add-on that asked, by name) and its own ``token`` (an outbox row)."""

    owner: str
    token: int


class Send(NamedTuple):
    """A message the proxy wrote or rewrote. ``answers``: it is the response to the request being
    relayed (an HTTP transport makes it the body); ``method``: the method of a request or
    notification, for transports that mirror it (MCP 2026-07-28 `Mcp-Method`/`Mcp-Name` headers).
    ``receipts``: what it delivers that must be reported once written (`Flow.written`), or dropped
    unwritten (`Flow.unwritten`)."""

    to: str
    data: bytes
    answers: bool = False
    method: str | None = None
    name: str | None = None
    receipts: tuple[Receipt, ...] = ()


class Reply(NamedTuple):
    """The proxy answers a request itself, in place of the other side. ``retry_after_ms``: the
    request was refused for a while (a budget): HTTP says so in `Retry-After`."""

    to: str
    data: bytes
    request_id: Any = None
    retry_after_ms: int | None = None


class Call(NamedTuple):
    """The proxy's own request to ``to``. Its id was made by the flow that sent it, and the answer
    goes back to that flow (fed as any other frame from that side; the flow routes it to its own
    handler). Transports that answer in a separate exchange (HTTP) feed the answer frames back the
    same way."""

    to: str
    data: bytes
    id: str


class Wakeup(NamedTuple):
    """Call the flow's `wake(now)` at ``at`` (the flow's monotonic clock): budgets refilling,
    TTLs, outbox polls. The latest Wakeup a flow asked for replaces earlier ones."""

    at: float


class Defer(NamedTuple):
    """Blocking work (SQLite) to run off the event loop; ``done(result)`` then gives the commands
    that follow from it (an exception from ``work`` is passed to ``done`` as the result).

    ``lane``: the executor to run it on (the outbox store's own thread), else the transports' one.
    ``replies``: what ``done`` gives is the answer to the request being handled, so a transport that
    answers in the request's own response waits for it; any other Defer on an answer's path is waited
    for only a little (`driver.STORE_WAIT_S`), and what it gives later goes out on its own."""

    work: Callable[[], Any]
    done: Callable[[Any], "list[Command]"]
    lane: Any = None
    replies: bool = False


class Perform(NamedTuple):
    """Shared-state work (an op of `bridge.state.ops`: charge a budget, push, take or count a
    queue): perform ``op`` on ``state`` (at once, in the same call, when ``state.sync``; else
    asynchronously) and hand its result to ``flow.performed(ticket, result)``, then perform what
    ``flow.drain()`` gives.  Until then the flow queues its own later frames (`Pause`), and handles
    them in order once it goes on.  ``flow`` is the one that waits: one driver may serve several
    (an A2A route's requests share their task book's)."""

    op: Any
    ticket: int
    state: Any
    flow: Any


class Pause(NamedTuple):
    """What a flow queued while it waits on shared state passed its bound (``on``: stop reading
    both sides), or fell back under half of it (not ``on``: read again)."""

    on: bool


Command = Forward | Send | Reply | Call | Wakeup | Defer | Perform | Pause
WRITES = (Forward, Send, Reply, Call)


def writes(commands: list[Command]) -> list[Forward | Send | Reply | Call]:
    """The commands that put bytes on a wire, in order (tests and simple transports)."""
    return [c for c in commands if isinstance(c, WRITES)]


def receipts_of(commands: Any) -> tuple[Receipt, ...]:
    """The receipts the given write commands carry (to report once they are written)."""
    return tuple(r for c in commands if type(c) is Send for r in c.receipts)
