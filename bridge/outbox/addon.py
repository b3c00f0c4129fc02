"""The outbox add-on of a route: its two halves, put together from the route's rules (docs/outbox.md).

- `pull.OutboxPull` (`outbox`): the server's outboxes polled, their events delivered as reminders
  (on a flow of one 2026-07-28 request of an identity, `owners.HostedPull`: its scope's keeper polls);
- `serving.OutboxServe` (`serve_outbox`): the server's reminders recorded and served as an outbox.

Each is a flow add-on of its own (bridge/pipeline/addons.py) that uses only the flow's public API
and answers with commands; every SQLite call is a `Defer` the transport runs off the event loop,
one at a time, on the store's lane. What they share is the route's `Store` (one per file and
route) and, on a route with both, the served outbox, where pulled rows go for a host that does
not listen. The pull half is asked first: it sees every host request before the serve half may
answer one in the server's place.
"""
from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Callable
from typing import Any

from bridge.declaration import read_manifest
from bridge.outbox.owners import HostedPull, PullOwners
from bridge.outbox.pull import OutboxPull
from bridge.outbox.served import ServedOutbox
from bridge.outbox.serving import OutboxServe
from bridge.outbox.store import Store, default_path
from bridge.pipeline.addons import AddOn
from bridge.pipeline.negotiation import observes


def outbox_for(settings: Any, recorder: Any, wall: Callable[[], float] = time.time, *,
               owners: PullOwners | None = None, keeper: bool = False) -> tuple[AddOn, ...]:
    """The halves a route with `outbox` and/or `serve_outbox` needs, pull first; none (with the
    reason logged) when the route has neither, its stage is `observe`, or the store cannot open.
    ``owners``: the route's book of pull owners, for a flow of one request whose scope's polls are
    its keeper's (the flow gets a `HostedPull`), or for that keeper (``keeper``: it owns them)."""
    pull = getattr(settings, "outbox", None)
    serve = getattr(settings, "serve_outbox", None)
    if pull is None and serve is None:
        return ()
    if observes(settings.stage):
        recorder.log("outbox_off", why="stage is observe: the proxy sends and answers nothing of its own")
        return ()
    resource = None
    try:
        if pull is not None:
            resource = pull.resource or (read_manifest(pull.manifest) if pull.manifest else None)
    except ValueError as exc:
        recorder.log("outbox_off", why=f"outbox.manifest: {exc}")
        return ()
    path = next((p for p in (pull and pull.store, serve and serve.store) if p), None) or default_path()
    try:
        store = _open(recorder, path)
    except (OSError, sqlite3.Error) as exc:
        recorder.log("outbox_off", why=f"cannot open the outbox store {str(path)!r}: {exc}")
        return ()
    route = recorder.route
    served = ServedOutbox(serve.resource, serve.retention_s, store) if serve is not None else None
    halves: list[AddOn] = []
    if pull is not None and owners is not None and not keeper:
        halves.append(HostedPull(owners))
    elif pull is not None:
        halves.append(OutboxPull(store, pull, route=route, resource=resource, served=served, owners=owners,
                                 wall=wall))
    if served is not None:
        halves.append(OutboxServe(store, served, route=route, identity=settings.identity, wall=wall))
    return tuple(halves)


_STORES: "weakref.WeakKeyDictionary[Any, dict[str, Store]]" = weakref.WeakKeyDictionary()


def _open(recorder: Any, path: Any) -> Store:
    """One `Store` per file and route (its recorder): every session of a route shares its connection."""
    stores = _STORES.setdefault(recorder, {})
    key = str(path)
    if key not in stores:
        stores[key] = Store(path)
    return stores[key]
