"""`OutboxPull`: outbox → reminders, the pull half of the outbox add-on (docs/outbox.md).

Once the host's handshake has committed the connection (2025-11-25: after
`notifications/initialized`; 2026-07-28: after a successful `server/discover`, or the host's
first request carrying the `_meta` envelope), the proxy polls the server on its own:
`resources/read` of `<resource>?cursor=…&maxEvents=…&maxAgeMs=…`, or, on a 2026-07-28 server that
advertises `io.modelcontextprotocol/events`, `events/poll` for each event that offers poll
delivery. Which era the connection is in is the MCP flow's to say (`flow.modern`); this half only
waits for the handshake to be over. Its requests are the flow's own calls (ids no host uses) and
their answers come back here, never forwarded. On 2026-07-28 they carry the `_meta` envelope the
host's own requests carry. Each answer's events are stored, with the new cursor, in one
transaction (`store.Store.accept`); what is stored and not yet handed over goes to the host as
reminders (`flow.deliver`: policy, then the host's dialect or fallback) and is marked delivered
once the transport reports the `Send` carrying it written to the host's connection (its
`Receipt`), so each event reaches a host once, across restarts too. On a route that also serves
an outbox, a host that does not listen reads them there instead (`ServedOutbox.move`).

**Whose.**  Every row and cursor is keyed by the flow's `Scope`; a request that is nobody's
beyond its answer polls nothing (nothing later would carry what it found). A 2026-07-28 request
of an identity on `serve` ends with its answer, before its poll's would come: there this half is
the identity's keeper's, the one owner of the identity's polls (`owners`), and each request's
flow hands it what it shows of the host and what its answer carried (`owners.HostedPull`).

**Store trouble.**  A row written to the host whose mark cannot commit is kept in memory and
marked at the retry; rows wait in the store while it fails, so none is handed over twice.
"""
from __future__ import annotations

import copy
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from bridge.dialects.mcp import CLIENT_CAPS_KEY, CLIENT_INFO_KEY, CODECS, HOST_CODECS, PROTOCOL_KEY
from bridge.model import Reminder, uuid7
from bridge.outbox.base import HANDSHAKES, StoreAddOn, run_quietly
from bridge.declaration import read_uri
from bridge.outbox.events import Malformed, answer_from_read, gap_reminder, parse_answer, parse_event, to_reminder
from bridge.outbox.owners import PullOwners
from bridge.outbox.poller import Cadence, Poller
from bridge.outbox.served import ServedOutbox
from bridge.outbox.store import Store
from bridge.pipeline.addons import Message
from bridge.pipeline.commands import PEER, Call, Command, Defer, Receipt
from bridge.state.scope import IDENTITY

EVENTS_EXTENSION = "io.modelcontextprotocol/events"
#: What the proxy promises a listening host about the reminders it makes from events.
REMINDER_CAPABILITY = {"emit": True, "propagate": ["session"], "roleHints": ["user_block"]}
ABANDONED_KEPT = 256


class Asked(NamedTuple):
    """One of this half's own requests in flight, as data: a read of ``channel`` from ``cursor``,
    or (``channel`` None) a page of `events/list`."""

    channel: str | None = None
    cursor: str | None = None


class OutboxPull(StoreAddOn):
    """Per connection (stdio) or session (HTTP), on a route with `outbox`. ``served``: the route's
    own outbox, when it serves one too (rows a non-listening host reads there)."""

    name = "outbox"

    def __init__(self, store: Store, pull: Any, *, route: str, resource: str | None = None,
                 served: ServedOutbox | None = None, owners: PullOwners | None = None,
                 wall: Callable[[], float] = time.time):
        super().__init__(store, route=route, wall=wall)
        self.pull = pull
        self.resource = resource
        self.served = served
        #: the route's book of owners, when this half is its scope's keeper's (`owners`): it polls
        #: only while it owns the scope's polls
        self.owners = owners
        #: what hosts are told the events come from (a reminder's id and `_meta`); rows are keyed by scope
        self.label = f"{route}|{resource or 'events'}"
        self.cadence = Cadence(pull.poll_floor_ms, pull.poll_ceiling_ms)
        # the handshake
        self.ready = False  # the host's handshake committed the connection: polls may start
        self.envelope: dict[str, Any] = {}
        self.server_events = False
        # polls
        self.pollers: dict[str, Poller] = {}
        self.started = False
        self.event_names: list[str] = []
        self.asked: dict[str, Asked] = {}  # own call id → what it asked, for requests in flight
        self.abandoned: OrderedDict[str, None] = OrderedDict()
        # delivery
        self.handed: set[int] = set()  # rows handed to the flow whose Send is not written yet (claimed)
        self.stored = True  # the store may hold undelivered events (a restart): look once
        self.reading = False  # a read of undelivered rows is under way
        # work the store failed, kept to try again
        self.unmarked: set[int] = set()  # rows written to the host whose mark did not commit (or is not made yet)
        self.unwritten = False  # rows handed over came back unwritten: read them again at the retry

    @property
    def source(self) -> str:
        """The key of this scope's pulled rows and cursors."""
        return self.flow.scope.key(f"outbox-pull:{self.resource or 'events'}")

    # -- the handshake -----------------------------------------------------------------------
    def host_markers(self) -> tuple[bytes, ...]:
        """`initialized` until the handshake is over."""
        return () if self.ready else (b"initialized",)

    def on_host(self, msg: Message) -> None:
        if self.noted(msg):
            self.flow.watch(msg, self)
        return None

    def noted(self, msg: Message) -> bool:
        """What a host message says of the handshake (this flow's, or a request's of the scope whose
        polls this half owns: `owners.HostedPull`); True for a handshake, whose response to watch."""
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method in HANDSHAKES and "id" in msg:
            if method == "server/discover":
                self._copy_envelope(meta)
            return True
        if method == "notifications/initialized" and not self.ready:
            self._commit()
        elif PROTOCOL_KEY in meta and "id" in msg:
            self._copy_envelope(meta)
            if not self.ready:
                self._commit()  # the host committed the connection to 2026-07-28 without a probe
        return False

    def _copy_envelope(self, meta: dict[str, Any]) -> None:
        """The 2026-07-28 `_meta` keys a request must carry, as the host's own requests carry them."""
        if PROTOCOL_KEY in meta:
            self.envelope = {k: copy.deepcopy(meta[k]) for k in (PROTOCOL_KEY, CLIENT_CAPS_KEY, CLIENT_INFO_KEY)
                             if k in meta}
            self.envelope.setdefault(CLIENT_CAPS_KEY, {})

    def _commit(self) -> None:
        self.ready = True
        self.flow.refresh_markers()  # the `initialized` marker is no longer needed

    def on_response(self, request_method: str | None, response: Message) -> Message | None:
        return self.handshake(request_method, response, self.flow.host.dialect)

    def handshake(self, request_method: str | None, response: Message, target: str) -> Message | None:
        """The handshake's result: whether the server offers events, and what the host is told it
        will get (reminders, in its dialect: ``target``)."""
        result = response.get("result")
        if request_method not in HANDSHAKES or not isinstance(result, dict):
            return None  # a failed probe: the host falls back to initialize, and so do we
        caps = result.get("capabilities")
        if request_method == "server/discover":
            extensions = caps.get("extensions") if isinstance(caps, dict) else None
            self.server_events = isinstance(extensions, dict) and EVENTS_EXTENSION in extensions
            if not self.ready:
                self._commit()
        if not isinstance(caps, dict):
            return None
        if target in CODECS:
            codec = CODECS[target]
            codec.write_capability(caps, _merge_capability(codec.read_capability(caps)))
        return response

    def resumed(self) -> None:
        """A 2025-11-25 session the proxy took up again (a restart) without its handshake: it is
        over, so this half polls and hands over what is stored for it."""
        if not self.ready:
            self._commit()

    # -- timers ------------------------------------------------------------------------------
    def next_wake(self) -> float | None:
        times = self._timers()
        if self._pulls():
            if not self.started:
                times.append(self.store.next_start(self.source, self.now))
            elif self.stored and not self.reading and self.store.health.failing_since is None:
                return self.now
            for poller in self.pollers.values():
                times.append(poller.due_at if poller.in_flight is None
                             else poller.in_flight + self.cadence.timeout_ms / 1000)
        return min(times)

    def wake(self, now: float) -> list[Command]:
        out = super().wake(now)
        if not self._pulls():
            return out
        if not self.started and now >= self._start_at(now):
            self.started = True
            out += self._start()
        out += self._deliver()
        for channel, poller in self.pollers.items():
            if poller.expired(now):
                self._abandon(channel)
                poller.failed(now)
                self.flow.recorder.log("outbox_poll_failed", channel=channel, why="no answer within "
                                       f"{self.cadence.timeout_ms} ms; next read in {poller.wait_ms(now):.0f} ms")
            if poller.due(now):
                out += self._poll(channel, poller)
        return out

    def attach(self, flow: Any) -> None:
        super().attach(flow)
        if self.owners is not None and self.owned:
            self.owners.claim(self)  # the scope's requests hand what they see of the host to its owner

    def _pulls(self) -> bool:
        """Whether this flow polls: the handshake is over, the flow's state outlives its request
        (there is a later stream to deliver to), and no other keeper owns the scope's polls."""
        return self.ready and self.owned and (self.owners is None or self.owners.claim(self))

    def _retry(self) -> list[Command]:
        """What the store failed, tried again."""
        self.stored = self.stored or self.unwritten
        self.unwritten = False
        if not self.unmarked:
            return []
        rows, self.unmarked = sorted(self.unmarked), set()
        return [self._mark(rows)]

    def _prune(self) -> Defer:
        """Rows whose session never came back within 2 × max_age_ms go, each counted dropped."""
        store, before_ms = self.store, self._wall_ms() - 2 * self.pull.max_age_ms

        def work() -> tuple[int, int]:
            _, abandoned = store.prune_inbox(before_ms)
            return abandoned, store.held()

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):
                self.flow.recorder.log("outbox_store_error", why=f"pruning: {outcome}")
                return []
            abandoned, store.held_rows = outcome
            for _ in range(abandoned):
                self.flow.recorder.reminder("dropped", protocol="mcp", method=None,
                                            why="an outbox event waited 2 × max_age_ms for its session to come back")
            return []

        return self._defer(work, done)

    # -- polls -------------------------------------------------------------------------------
    def _start_at(self, now: float) -> float:
        """When polling may start: at once, except that flows of one identity that each live one
        request and poll on their own (no keeper: a server that keeps no session) start one poll
        per floor between them."""
        if self.flow.scope.kind != IDENTITY:
            return now
        return self.store.poll_start(self.source, now, self.cadence.floor_ms / 1000)

    def _start(self) -> list[Command]:
        """The first ready wake: discover events (2026-07-28 servers with the Events extension),
        else poll the declared resource."""
        if self.flow.modern and self.server_events:
            return [self._request("events/list", {}, Asked())]
        self._poll_resource()
        return []

    def _poll_resource(self) -> None:
        if self.resource is None:
            self.flow.recorder.log("outbox_idle", why="the route names no outbox resource and the server offers "
                                   "no pollable events (io.modelcontextprotocol/events on 2026-07-28)")
            return
        self.pollers[self.resource] = Poller(self.cadence, self.now)

    def _request(self, method: str, params: dict[str, Any], asked: Asked, extension: bool = False) -> Call:
        """One of this half's own requests; its answer comes to `_answered`, with ``asked``."""
        if self.flow.modern:
            meta = copy.deepcopy(self.envelope)
            if extension:
                caps = meta.setdefault(CLIENT_CAPS_KEY, {})
                caps.setdefault("extensions", {}).setdefault(EVENTS_EXTENSION, {})
            params = {**params, "_meta": meta}
        call = self.flow.call(PEER, method, params, self._answered)
        self.asked[call.id] = asked
        return call

    def _poll(self, channel: str, poller: Poller) -> list[Command]:
        poller.start(self.now)
        store, source = self.store, self.source

        def read(cursor: Any) -> list[Command]:
            if isinstance(cursor, BaseException):
                poller.failed(self.now)
                self.flow.recorder.log("outbox_store_error", channel=channel, why=f"reading the cursor: {cursor}")
                return []
            pull = self.pull
            asked = Asked(channel, cursor)
            if channel.startswith("events:"):
                params = {"name": channel[len("events:"):], "arguments": {}, "cursor": cursor,
                          "maxEvents": pull.max_events, "maxAgeMs": pull.max_age_ms}
                return [self._request("events/poll", params, asked, extension=True)]
            uri = read_uri(channel, cursor, pull.max_events, pull.max_age_ms)
            return [self._request("resources/read", {"uri": uri}, asked)]

        return [self._defer(lambda: store.cursor(source, channel), read)]

    def _abandon(self, channel: str) -> None:
        """A read given up on: its late answer is dropped (the flow still routes it here)."""
        for own, asked in list(self.asked.items()):
            if asked.channel == channel:
                del self.asked[own]
                self.abandoned[own] = None
        while len(self.abandoned) > ABANDONED_KEPT:
            self.abandoned.popitem(last=False)

    # -- answers to the proxy's own requests -------------------------------------------------
    def _answered(self, msg: Message) -> list[Command]:
        """The answer to one of this half's own requests: what it asked says what to do with it."""
        own = msg.get("id")
        if own in self.abandoned:
            del self.abandoned[own]
            return []  # a late answer to a read already given up on
        asked = self.asked.pop(own, None) if isinstance(own, str) else None
        if asked is None:
            return []
        if asked.channel is None:
            return self._event_list(msg)
        return self._polled(msg, asked.channel, asked.cursor)

    def _polled(self, msg: Message, channel: str, cursor: str | None) -> list[Command]:
        poller = self.pollers.get(channel)
        if poller is None:
            return []
        method = "events/poll" if channel.startswith("events:") else "resources/read"
        try:
            if "error" in msg:
                error = msg["error"] if isinstance(msg["error"], dict) else {}
                raise Malformed(f"the server answered error {error.get('code')}: {str(error.get('message'))[:200]}")
            result = msg.get("result")
            answer = parse_answer(result) if method == "events/poll" else answer_from_read(result)
        except Malformed as exc:
            poller.failed(self.now)
            self.flow.recorder.log("outbox_poll_failed", channel=channel, why=f"{exc}; the cursor stays; next read "
                                   f"in {poller.wait_ms(self.now):.0f} ms")
            return []
        items: list[tuple[str, str, str]] = []
        if answer.truncated:
            items.append((f"reminder-bridge:gap:{uuid7()}", "gap", json.dumps({"cursor": cursor})))
            self.flow.recorder.log("outbox_truncated", channel=channel, why="the server reports a gap: events "
                                   "were dropped before the proxy read them")
        last_event_cursor = None
        for index, raw in enumerate(answer.events):
            try:
                event = parse_event(raw)
            except Malformed as exc:
                event_id = raw.get("eventId") if isinstance(raw, dict) and isinstance(raw.get("eventId"), str) else None
                self.flow.record("invalid", method, None, source="outbox",
                                 why=f"{channel}: event {index}{f' ({event_id[:80]})' if event_id else ''} dropped: {exc}")
                continue
            items.append((event.event_id, "event", json.dumps(event.raw, ensure_ascii=False)))
            last_event_cursor = event.cursor or last_event_cursor
        store, source, wall_ms = self.store, self.source, self._wall_ms()
        new_cursor = answer.cursor or last_event_cursor

        def stored(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):
                poller.failed(self.now)
                self.flow.recorder.log("outbox_store_error", channel=channel, why=f"{outcome}; the cursor stays")
                return []
            self.stored = self.stored or bool(items)
            poller.succeeded(self.now, events=len(answer.events), has_more=answer.has_more,
                             next_poll_ms=answer.next_poll_ms)
            out = self._deliver()
            if poller.due(self.now):  # hasMore: read again at once
                out += self._poll(channel, poller)
            return out

        return [self._defer(lambda: store.accept(source, channel, items, new_cursor, wall_ms), stored)]

    def _event_list(self, msg: Message) -> list[Command]:
        """`events/list` (paginated): poll every event that offers poll delivery and takes no arguments."""
        result = msg.get("result")
        events = result.get("events") if isinstance(result, dict) else None
        if not isinstance(events, list):
            self.flow.recorder.log("outbox_events_unavailable", why="events/list failed; polling the outbox resource")
            self._poll_resource()
            return []
        for entry in events:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            delivery = entry.get("delivery")
            schema = entry.get("inputSchema") if isinstance(entry.get("inputSchema"), dict) else {}
            if isinstance(delivery, list) and "poll" in delivery and not schema.get("required"):
                self.event_names.append(entry["name"])
        next_cursor = result.get("nextCursor")
        if isinstance(next_cursor, str) and next_cursor:
            return [self._request("events/list", {"cursor": next_cursor}, Asked())]
        if not self.event_names:
            self._poll_resource()
        for name in self.event_names:
            self.pollers[f"events:{name}"] = Poller(self.cadence, self.now)
        out: list[Command] = []
        for channel, poller in self.pollers.items():
            if poller.due(self.now):
                out += self._poll(channel, poller)
        return out

    # -- delivery to the host ----------------------------------------------------------------
    def _deliver(self) -> list[Command]:
        """Everything stored for this scope and not yet written, oldest first (read off the loop).
        While the store fails, rows wait: one written whose mark cannot commit would come again."""
        if not self.stored or self.reading:
            return []
        if self.store.health.failing_since is not None:
            self._retry_later()  # looked at again then
            return []
        self.stored = False
        self.reading = True
        store, source = self.store, self.source

        def rows(found: Any) -> list[Command]:
            self.reading = False
            if isinstance(found, BaseException):
                self.stored = True  # try again next wake
                self.flow.recorder.log("outbox_store_error", why=str(found))
                self._retry_later()
                return []
            return self._hand_over(found)

        return [self._defer(lambda: store.undelivered(source), rows)]

    def _hand_over(self, rows: list[tuple[int, str, str, str]]) -> list[Command]:
        out: list[Command] = []
        gone: list[int] = []
        method = "events/poll" if self.server_events and self.flow.modern else "resources/read"
        claimed = self.store.claimed
        for rowid, event_id, kind, payload in rows:
            if rowid in claimed:
                continue  # handed over already (here, or by another flow of this scope), not yet written
            reminder = self._reminder(event_id, kind, payload)
            if reminder is None:
                gone.append(rowid)
                continue
            claimed.add(rowid)
            if self.served is not None and self.flow.target() not in HOST_CODECS:
                # a host that does not listen reads it there
                out.append(self._serve_instead(self.served, rowid, reminder, method))
                continue
            self.handed.add(rowid)
            out += self.flow.deliver(reminder, method, "outbox", Receipt(self.name, rowid))
        if gone:
            claimed.update(gone)
            out.append(self._mark(gone))
        return out

    def _serve_instead(self, served: ServedOutbox, rowid: int, reminder: Reminder, method: str) -> Defer:
        """A pulled row moved into the served outbox, in one transaction (it is in one or the other)."""
        key, store, now_ms = served.key(self.flow.scope), self.store, self._wall_ms()
        self.flow.record("queued", method, reminder, source="outbox", target="outbox")

        def done(outcome: Any) -> list[Command]:
            store.claimed.discard(rowid)
            if isinstance(outcome, BaseException):
                self.stored = True  # read again once the store is back
                self.flow.recorder.log("outbox_store_error", id=reminder.id, why=f"serving: {outcome}")
                self._retry_later()
            return []

        return self._defer(lambda: served.move(key, rowid, reminder, now_ms), done)

    def _reminder(self, event_id: str, kind: str, payload: str) -> Reminder | None:
        try:
            data = json.loads(payload)
            if kind == "gap":
                return gap_reminder(self.label, event_id, data.get("cursor"), self.resource or "the server's events")
            return to_reminder(self.label, parse_event(data))
        except (ValueError, Malformed) as exc:  # only if the store was edited by hand
            self.flow.recorder.log("outbox_store_error", why=f"stored event {event_id[:80]!r} unreadable: "
                                   f"{type(exc).__name__}")
            return None

    # -- receipts: what the transport wrote --------------------------------------------------
    def on_written(self, receipts: Sequence[Receipt]) -> list[Command]:
        """Rows whose reminder is on the host's connection (or was decided without a write): done."""
        rows = self._done_with(receipts)
        return [self._mark(rows)] if rows else []

    def written_by(self, receipts: Sequence[Receipt]) -> None:
        """Rows a request of this half's scope wrote (its answer carried them): marked at this half's
        next wake, by its own flow (the request's ends with its answer; it wakes this one then)."""
        rows = self._done_with(receipts)
        if rows:
            self.unmarked.update(rows)
            if self.retry_at is None:
                self.retry_at = self.now  # due at once

    def _done_with(self, receipts: Sequence[Receipt]) -> list[int]:
        """The rows of ``receipts`` this half still has to mark (none once it is closed: then they
        are marked on the store's lane, as its session ended; nobody performs commands for it)."""
        rows = [r.token for r in receipts if r.owner == self.name]
        self.handed.difference_update(rows)
        if rows and self.closed:
            self.store.lane.submit(run_quietly, self.store.mark_delivered, rows)
            return []
        return rows

    def on_unwritten(self, receipts: Sequence[Receipt]) -> None:
        """Rows whose reminder never reached the host: handed over again, to this scope only."""
        rows = [r.token for r in receipts if r.owner == self.name]
        self.handed.difference_update(rows)
        self.store.claimed.difference_update(rows)
        if rows:  # handed over again at the retry, not at once: the session's queue may be full
            self.unwritten = True
            self._retry_later()

    def _mark(self, rowids: list[int]) -> Defer:
        """Rows done with: marked delivered (they stay claimed until that commits, so nothing hands
        them over again meanwhile; a failed mark is tried again)."""
        store = self.store

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):
                self.flow.recorder.log("outbox_store_error", why=f"marking {len(rowids)} event(s) delivered: {outcome}; "
                                       "tried again")
                self.unmarked.update(rowids)
                store.health.retries += len(rowids)
                self._retry_later()
            else:
                store.claimed.difference_update(rowids)
                self.retries = 0
            return []

        return self._defer(lambda: store.mark_delivered(rowids), done)

    def close(self) -> None:
        """Rows handed over and never written go back to their scope; a mark that could not commit is
        tried once more, on the store's lane (nothing waits for it)."""
        self.closed = True
        if self.owners is not None:
            self.owners.release(self)
        self.store.claimed.difference_update(self.handed)
        self.handed.clear()
        if self.unmarked:
            rows, store = sorted(self.unmarked), self.store
            self.unmarked.clear()
            store.lane.submit(run_quietly, store.mark_delivered, rows)


def _merge_capability(found: dict[str, Any] | None) -> dict[str, Any]:
    if found is None:
        return copy.deepcopy(REMINDER_CAPABILITY)
    merged = dict(found)
    merged["emit"] = True
    for key in ("propagate", "roleHints"):
        values = list(found.get(key) or [])
        merged[key] = values + [v for v in REMINDER_CAPABILITY[key] if v not in values]
    return merged
