"""Whose polls: one pull half per scope, for scopes whose flows live one request each.

Over `serve` a 2026-07-28 request has no session: each is a flow of its own, over once answered,
so a poll it made may be answered after it ended, and its cursor, in-flight read and rows handed
over would end with it. For such a scope (an identity the rules name) the route keeps a *keeper*:
a flow of the scope that outlives its requests, whose `pull.OutboxPull` is the scope's one owner
of the outbox poll (cursor, read in flight, rows handed over), registered here under the scope's
key. Each request's flow gets a `HostedPull` instead: what the request shows of the host (its
`_meta` envelope, the server's handshake answer) and what its answer carried (receipts for rows
the owner handed over) go to the owner; it polls nothing itself.

The book is the route's, keyed by `Scope.key`, so two identities never reach one owner. Pure: no
I/O, no clock; the transport keeps the keepers (bounded, idle ones end) and wakes one when a
request of its scope ends (`Flow.rearm`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from bridge.pipeline.addons import AddOn, McpFlowApi, Message
from bridge.pipeline.commands import Command, Receipt

if TYPE_CHECKING:
    from bridge.state.scope import Scope

#: what an owner is registered under, in its scope
OWNER_KEY = "outbox-pull-owner"


class Owner(Protocol):
    """What the book and the requests' flows use of an owner (`pull.OutboxPull`, which imports this)."""

    flow: McpFlowApi

    def noted(self, msg: Message) -> bool: ...

    def handshake(self, request_method: str | None, response: Message, target: str) -> Message | None: ...

    def written_by(self, receipts: Sequence[Receipt]) -> None: ...

    def on_unwritten(self, receipts: Sequence[Receipt]) -> None: ...


class PullOwners:
    """A route's pull owners, one per scope: the first keeper of a scope to claim it, until it closes."""

    def __init__(self) -> None:
        self._owners: dict[str, Owner] = {}

    def claim(self, pull: Owner) -> bool:
        """Whether ``pull`` owns its scope's polls (it does once no other keeper of the scope does)."""
        return self._owners.setdefault(pull.flow.scope.key(OWNER_KEY), pull) is pull

    def release(self, pull: Owner) -> None:
        key = pull.flow.scope.key(OWNER_KEY)
        if self._owners.get(key) is pull:
            del self._owners[key]

    def of(self, scope: Scope) -> Owner | None:
        return self._owners.get(scope.key(OWNER_KEY))


class HostedPull(AddOn):
    """The pull half of one request's flow whose scope's polls are its keeper's (see the module):
    the request's host facts and receipts, handed to the owner; no poll, no state of its own."""

    name = "outbox"  # the owner's receipts name it so: the request's answer carries them
    flow: McpFlowApi

    def __init__(self, owners: PullOwners):
        self.owners = owners

    @property
    def owner(self) -> Owner | None:
        return self.owners.of(self.flow.scope) if self.flow.scope.lasting else None

    def on_host(self, msg: Message) -> None:
        owner = self.owner
        if owner is not None and owner.noted(msg):
            self.flow.watch(msg, self)
        return None

    def on_response(self, request_method: str | None, response: Message) -> Message | None:
        owner = self.owner
        return owner.handshake(request_method, response, self.flow.host.dialect) if owner is not None else None

    def on_written(self, receipts: Sequence[Receipt]) -> list[Command]:
        owner = self.owner
        if owner is not None:
            owner.written_by(receipts)
        return []

    def on_unwritten(self, receipts: Sequence[Receipt]) -> None:
        owner = self.owner
        if owner is not None:
            owner.on_unwritten(receipts)

