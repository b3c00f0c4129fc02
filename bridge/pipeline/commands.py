"""The vocabulary between a flow and the transport that runs it (ARCHITECTURE.md, as in h11 and
mitmproxy): a flow is fed one frame (or a timer) and answers with these commands; the transport
performs them in order and never re-reads a frame to learn what the flow meant.

Every command that writes bytes is a `Write`: it has `to` and `data` (`Forward.data` is the
incoming frame itself, the same object, untouched), so a transport writes any of them alike and
tells them from the rest with one `isinstance`. A response says which request it answers
(`answers`, the request's `jsonrpc.id_key`), so no transport reads an id off the bytes.

Writes are slotted dataclasses, not NamedTuples: they share a base, and one is made per frame on
the hot path (a slotted class is made in about half the time of a NamedTuple).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from bridge.jsonrpc import id_key

HOST, PEER = "host", "peer"


@dataclass(slots=True)
class Write:
    """A command that puts ``data`` on the wire toward ``to`` (`HOST` or `PEER`)."""

    to: str
    data: bytes


@dataclass(slots=True)
class Forward(Write):
    """Pass the frame being handled on to ``to``, byte for byte. ``answers``: the id key of the
    request it is the response to, when the flow tracked that request (`Flow.unanswered`).
    ``lasting``: a request whose answer is a stream that may rightly say nothing for hours (MCP
    2026-07-28 `subscriptions/listen`): a transport puts no idle bound on it."""

    answers: Any = field(default=None, compare=False)
    lasting: bool = field(default=False, compare=False)


class Receipt(NamedTuple):
    """What a transport reports back (`Flow.written`) once the `Send` carrying it is on the host's
    connection: ``owner`` (the add-on that asked, by name) and its own ``token`` (an outbox row)."""

    owner: str
    token: int


@dataclass(slots=True)
class Send(Write):
    """A message the proxy wrote or rewrote. ``answers``: the id key of the request it is the
    response to (an HTTP transport makes it the body), else None; ``method``: the method of a request or
    notification, for transports that mirror it (MCP 2026-07-28 `Mcp-Method`/`Mcp-Name` headers).
    ``receipts``: what it delivers that must be reported once written (`Flow.written`), or dropped
    unwritten (`Flow.unwritten`). ``stream``: the flow's own key (`Flow.subscription`) for the stream
    of the host's `subscriptions/listen` it goes on, when that is another exchange than the one at
    hand (MCP 2026-07-28 over HTTP, where each request is its own stream); None: where the flow's
    other writes go."""

    answers: Any = field(default=None, compare=False)
    method: str | None = None
    name: str | None = None
    receipts: tuple[Receipt, ...] = ()
    stream: Any = None
    lasting: bool = field(default=False, compare=False)  # as `Forward.lasting`


@dataclass(slots=True)
class Reply(Write):
    """The proxy answers a request itself, in place of the other side. ``retry_after_ms``: the
    request was refused for a while (a budget): HTTP says so in `Retry-After`."""

    request_id: Any = None
    retry_after_ms: int | None = None

    @property
    def answers(self) -> Any:
        """The id key of the request it answers (as `Send.answers`)."""
        return id_key(self.request_id)


@dataclass(slots=True)
class Call(Write):
    """The proxy's own request to ``to``. Its id was made by the flow that sent it, and the answer
    goes back to that flow (fed as any other frame from that side; the flow routes it to its own
    handler). Transports that answer in a separate exchange (HTTP) feed the answer frames back the
    same way. ``method``, ``name``: what it asks, for transports that mirror it (as `Send`'s)."""

    id: str
    method: str | None = None
    name: str | None = None


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


class Learned(NamedTuple):
    """What a flow learned of the peer (its handshake, the A2A card), as `Flow.learned` gives it:
    the ``dialect`` it speaks and (MCP) whether it ``declared`` the reminder capability. A transport
    that makes a flow per request seeds the next ones with it (`HttpRoute.learn`). Not a command: a
    transport asks for it after the frames it fed, so no command stream carries it."""

    dialect: str
    declared: bool | None = None


@runtime_checkable
class CardFlow(Protocol):
    """A flow whose peer publishes a card (A2A's agent card): the card as the caller should see it
    (``url_for`` maps an upstream URL to the proxy's), None when nothing in it changes. The flow
    learns the peer's dialect from it (`Flow.learned`)."""

    def rewrite_card(self, card: dict[str, Any],
                     url_for: Callable[[str], str] | None = None) -> dict[str, Any] | None: ...


Command = Forward | Send | Reply | Call | Wakeup | Defer | Perform | Pause


def writes(commands: list[Command]) -> list[Write]:
    """The commands that put bytes on a wire, in order (tests and simple transports)."""
    return [c for c in commands if isinstance(c, Write)]


def receipts_of(commands: Any) -> tuple[Receipt, ...]:
    """The receipts the given write commands carry (to report once they are written)."""
    return tuple(r for c in commands if type(c) is Send for r in c.receipts)
