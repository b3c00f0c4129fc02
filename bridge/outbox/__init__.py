"""Outboxes: server→host facts that are pulled, not pushed (docs/outbox.md).

Two channels for facts nobody asked for exist side by side: push reminders (this project's
core) and pull *outboxes*, where a server exposes its events as one MCP resource that the host
polls (NimbleBrain's "notifications outbox", the poll shape of MCP's draft Events extension,
SEP-3415).  This package bridges them, in both directions, as pure code:

- `events`: poll answers and `EventOccurrence`s in, reminders out (and reminders → events);
- `poller`: the cadence state machine of one poll stream (clock injected);
- `store`: the durable SQLite store (dedupe, cursors, the served outbox);
- `served`: answering reads of the proxy's own outbox resource;
- `base`: what both halves of the add-on share (the store's lane, housekeeping, the back-off);
- `pull`: `OutboxPull`, the add-on half that polls, stores and delivers;
- `serving`: `OutboxServe`, the add-on half that records and serves;
- `addon`: `outbox_for`, the halves a route needs, over one store.

Which outbox URIs are acceptable lives below both this package and the rules, in `bridge.declaration`,
so that `bridge.rules` imports no part of the outbox.
"""
