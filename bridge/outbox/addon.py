"""`OutboxAddOn`: the outbox rules of one MCP connection or session, as a flow add-on
(bridge/pipeline/addons.py). It uses only the flow's public API and answers with commands; every
SQLite call is a `Defer` the transport runs off the event loop, one at a time.

**Outbox → reminders.**  Once the host's handshake has committed the connection to an era
(2025-11-25: after `notifications/initialized`; 2026-07-28: after a successful
`server/discover`, or the host's first request carrying the `_meta` envelope), the proxy polls
the server on its own: `resources/read` of `<resource>?cursor=…&maxEvents=…&maxAgeMs=…`, or, on
a 2026-07-28 server that advertises `io.modelcontextprotocol/events`, `events/poll` for each
event that offers poll delivery. Its requests are the flow's own calls (ids no host uses) and
their answers come back here, never forwarded. On 2026-07-28 they carry the `_meta` envelope the
host's own requests carry. Each answer's events are stored, with the new cursor, in one
transaction (`store.Store.accept`); what is stored and not yet handed over goes to the host as
reminders (`flow.deliver`: policy, then the host's dialect or fallback) and is marked delivered
once the transport reports the `Send` carrying it written to the host's connection (its
`Receipt`), so each event reaches a host once, across restarts too.

**Reminders → outbox.**  A route with `serve_outbox` records every reminder the server pushes
in its own outbox resource, lists it in `resources/list` and answers its reads itself. A host
that listens for reminders still gets them pushed; a host that does not (dialect `none`) gets
them from the outbox instead of the tool-result fallback.

**Whose.**  Every row, cursor and served outbox is keyed by the flow's `Scope` (its stdio
connection, MCP session or identity): no session ever reads or receives another's.  A request
that is nobody's beyond its answer (a 2026-07-28 request the rules name no identity for) has no
outbox: reading the served one is refused with an error saying what to configure.

**Store trouble.**  A store call that fails (locked by another process, disk full) costs the
outbox its own work only: what could not be written (a reminder to serve, a row to mark
delivered) is kept in memory, bounded, counted, and tried again; the store's `health` makes
/readyz say degraded meanwhile.
"""
from __future__ import annotations

import copy
import json
import sqlite3
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from bridge.declaration import read_manifest, read_uri
from bridge.dialects.mcp import CODECS, HOST_CODECS
from bridge.jsonrpc import error_response
from bridge.model import Reminder, uuid7
from bridge.outbox.events import Malformed, answer_from_read, gap_reminder, parse_answer, parse_event, to_reminder
from bridge.outbox.poller import Cadence, Poller
from bridge.outbox.served import BadRead, Behind, Incoming, Item, ServedOutbox, no_owner
from bridge.outbox.store import Store, default_path
from bridge.pipeline.addons import AddOn
from bridge.pipeline.commands import HOST, PEER, Command, Defer, Receipt
from bridge.pipeline.negotiation import observes
from bridge.state.scope import IDENTITY

PROTOCOL_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
EVENTS_EXTENSION = "io.modelcontextprotocol/events"
#: What the proxy promises a listening host about the reminders it makes from events.
REMINDER_CAPABILITY = {"emit": True, "propagate": ["session"], "roleHints": ["user_block"]}
PRUNE_EVERY_S = 600.0
ABANDONED_KEPT = 256
HANDSHAKES = ("initialize", "server/discover")
#: After the store failed some work, when to try it again: doubling from the first, up to the last.
RETRY_FIRST_S, RETRY_LAST_S = 0.5, 30.0
#: Reminders for the served outbox kept in memory while the store cannot take them (the oldest go beyond).
UNSAVED_KEPT = 256


def outbox_for(settings: Any, recorder: Any, wall: Callable[[], float] = time.time) -> "OutboxAddOn | None":
    """The add-on for a route with `outbox` or `serve_outbox`, or None (with the reason logged)."""
    pull = getattr(settings, "outbox", None)
    serve = getattr(settings, "serve_outbox", None)
    if pull is None and serve is None:
        return None
    if observes(settings.stage):
        recorder.log("outbox_off", why="stage is observe: the proxy sends and answers nothing of its own")
        return None
    resource = None
    try:
        if pull is not None:
            resource = pull.resource or (read_manifest(pull.manifest) if pull.manifest else None)
    except ValueError as exc:
        recorder.log("outbox_off", why=f"outbox.manifest: {exc}")
        return None
    path = next((p for p in (pull and pull.store, serve and serve.store) if p), None) or default_path()
    try:
        store = _open(recorder, path)
    except (OSError, sqlite3.Error) as exc:
        recorder.log("outbox_off", why=f"cannot open the outbox store {str(path)!r}: {exc}")
        return None
    return OutboxAddOn(store, route=recorder.route, pull=pull, resource=resource, serve=serve,
                       identity=settings.identity, wall=wall)


_STORES: "weakref.WeakKeyDictionary[Any, dict[str, Store]]" = weakref.WeakKeyDictionary()


def _open(recorder: Any, path: Any) -> Store:
    """One `Store` per file and route (its recorder): every session of a route shares its connection."""
    stores = _STORES.setdefault(recorder, {})
    key = str(path)
    if key not in stores:
        stores[key] = Store(path)
    return stores[key]


class OutboxAddOn(AddOn):
    """Per connection (stdio) or session (HTTP); `outbox_for` builds one when the route has an outbox.
    What it stores is keyed by its flow's scope (`flow.scope`), read when the key is needed: a
    2025-11-25 session's flow learns its scope from the server's answer to `initialize`."""

    name = "outbox"

    def __init__(self, store: Store, *, route: str, pull: Any = None, resource: str | None = None,
                 serve: Any = None, identity: str | None = None, wall: Callable[[], float] = time.time):
        self.store = store
        self.route = route
        self.identity = identity
        self.wall = wall
        self.now = 0.0  # the last wake's monotonic clock: the only clock the state machines see
        # era and handshake
        self.era: str | None = None
        self.ready = False
        self.envelope: dict[str, Any] = {}
        self.server_events = False
        # outbox → reminders
        self.pull = pull
        self.resource = resource
        #: what hosts are told the events come from (a reminder's id and `_meta`); rows are keyed by scope
        self.label = f"{route}|{resource or 'events'}"
        self.cadence = Cadence(pull.poll_floor_ms, pull.poll_ceiling_ms) if pull else Cadence()
        self.pollers: dict[str, Poller] = {}
        self.started = False
        self.event_names: list[str] = []
        self.polls: dict[str, str] = {}  # own call id → channel, for reads in flight
        self.abandoned: OrderedDict[str, None] = OrderedDict()
        self.handed: set[int] = set()  # rows handed to the flow whose Send is not written yet (claimed)
        self.stored = True  # the store may hold undelivered events (a restart): look once
        self.reading = False  # a read of undelivered rows is under way
        self.next_prune = 0.0
        # reminders → outbox
        self.serve = ServedOutbox(serve.resource, serve.retention_s, store) if serve else None
        # work the store failed, kept to try again
        self.incoming = Incoming(UNSAVED_KEPT)  # reminders on their way into the served outbox
        self.unmarked: set[int] = set()  # rows written to the host whose mark did not commit
        self.unwritten = False  # rows handed over came back unwritten: read them again at the retry
        self.retry_at: float | None = None
        self.retries = 0  # failures in a row: the next retry waits longer
        self.closed = False

    # -- keys: the flow's scope --------------------------------------------------------------
    @property
    def source(self) -> str:
        """The key of this scope's pulled rows and cursors."""
        return self.flow.scope.key(f"outbox-pull:{self.resource or 'events'}")

    @property
    def served_key(self) -> str:
        assert self.serve is not None
        return self.flow.scope.key(f"outbox:{self.serve.resource}")

    @property
    def owned(self) -> bool:
        """Whether the flow's state outlives its request: a request that is nobody's has no outbox."""
        return self.flow.scope.lasting

    def _defer(self, work: Callable[[], Any], done: Callable[[Any], Any], replies: bool = False) -> Defer:
        """Store work, on the store's own lane."""
        return Defer(work, done, self.store.lane, replies)

    # -- pre-filter --------------------------------------------------------------------------
    def host_markers(self) -> tuple[bytes, ...]:
        """`initialized` until the era is settled, and `resources` while the proxy serves an outbox."""
        markers: tuple[bytes, ...] = ()
        if self.pull is not None and not self.ready:
            markers += (b"initialized",)
        if self.serve is not None:
            markers += (b"resources",)
        return markers

    # -- host → server -----------------------------------------------------------------------
    def on_host(self, msg: dict[str, Any]) -> list[Command] | None:
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method in HANDSHAKES and "id" in msg:
            self.flow.watch(msg, self)
            if method == "server/discover":
                self._copy_envelope(meta)
        elif method == "notifications/initialized" and not self.ready:
            self._settle("legacy")
        elif PROTOCOL_KEY in meta and "id" in msg:
            self._copy_envelope(meta)
            if not self.ready:
                self._settle("modern")  # the host committed the connection to 2026-07-28 without a probe
        if self.serve is not None and "id" in msg:
            if method == "resources/read" and self.serve.owns(params.get("uri")):
                if not self.owned:
                    return [self.flow.reply(HOST, msg, no_owner(msg["id"], self.serve.resource, self.route,
                                                                self.identity))]
                return [self._answer_read(msg, params["uri"])]
            if method == "resources/list" and self.owned:
                self.flow.watch(msg, self)
        return None

    def _copy_envelope(self, meta: dict[str, Any]) -> None:
        """The 2026-07-28 `_meta` keys a request must carry, as the host's own requests carry them."""
        if PROTOCOL_KEY in meta:
            self.envelope = {k: copy.deepcopy(meta[k]) for k in (PROTOCOL_KEY, CLIENT_CAPS_KEY, CLIENT_INFO_KEY)
                             if k in meta}
            self.envelope.setdefault(CLIENT_CAPS_KEY, {})

    def _settle(self, era: str) -> None:
        self.era = era
        self.ready = True
        self.flow.refresh_markers()  # the `initialized` marker is no longer needed

    def _answer_read(self, msg: dict[str, Any], uri: str) -> Defer:
        """The host reads the proxy's own outbox (its scope's): answered here (off the loop), never
        forwarded."""
        serve, key = self.serve, self.served_key
        assert serve is not None
        now_ms = int(self.wall() * 1000)

        def done(answer: Any) -> list[Command]:
            if isinstance(answer, BadRead):
                response = error_response(msg["id"], -32602, f"cannot read {uri}: {answer}")
            elif isinstance(answer, BaseException):
                self.flow.recorder.log("outbox_store_error", why=f"reading the served outbox: {answer}")
                response = error_response(msg["id"], -32603, f"cannot read {uri}: the proxy's outbox store failed")
            else:
                result: dict[str, Any] = {"contents": [{"uri": uri, "mimeType": "application/json",
                                                        "text": json.dumps(answer, ensure_ascii=False)}]}
                if self.era == "modern":
                    result.update(resultType="complete", ttlMs=0, cacheScope="private")
                response = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
                for _ in answer["events"]:
                    self.flow.record("attached", "resources/read", None, source="outbox", target="host")
            return [self.flow.reply(HOST, msg, response)]

        return self._defer(lambda: serve.read(key, uri, now_ms), done, replies=True)

    # -- responses toward the host -----------------------------------------------------------
    def on_response(self, request_method: str | None, response: dict[str, Any]) -> dict[str, Any] | None:
        if request_method in HANDSHAKES:
            return self._handshake_result(request_method, response)
        if request_method == "resources/list":
            return self.serve.listed(response, modern=self.era == "modern")  # type: ignore[union-attr]
        return None

    def _handshake_result(self, method: str, response: dict[str, Any]) -> dict[str, Any] | None:
        result = response.get("result")
        if not isinstance(result, dict):
            return None  # a failed probe: the host falls back to initialize, and so do we
        caps = result.get("capabilities")
        if method == "server/discover":
            extensions = caps.get("extensions") if isinstance(caps, dict) else None
            self.server_events = isinstance(extensions, dict) and EVENTS_EXTENSION in extensions
            if not self.ready:
                self._settle("modern")
        if not isinstance(caps, dict):
            return None
        if self.serve is not None and not isinstance(caps.get("resources"), dict):
            caps["resources"] = {}
        target = self.flow.host.dialect
        if self.pull is not None and target in CODECS:
            codec = CODECS[target]
            codec.write_capability(caps, _merge_capability(codec.read_capability(caps)))
        return response


    # -- reminders the server pushes ---------------------------------------------------------
    def on_reminder(self, reminder: Reminder, method: str | None, source: str,
                    target: str) -> tuple[list[Command], bool]:
        """Record a server's reminder in the proxy's outbox; a host that listens gets it pushed as
        usual too, one that does not reads it from the outbox instead (kept)."""
        if self.serve is None or not self.owned:
            return [], False
        self.flow.record("queued", method, reminder, source=source, target="outbox")
        incoming = self.incoming
        item, now = incoming.arrive(reminder, int(self.wall() * 1000))
        if not now:  # earlier ones wait for the store: this one waits behind them
            self._dropped(incoming.keep([item]))
            return [], target not in HOST_CODECS
        return [self._capture([item], retry=False)], target not in HOST_CODECS

    def _capture(self, items: list[Item], retry: bool) -> Defer:
        """Reminders into the served outbox (`Incoming` keeps their order through store trouble)."""
        serve, key, incoming = self.serve, self.served_key, self.incoming
        assert serve is not None

        def done(outcome: Any) -> list[Command]:
            failed = isinstance(outcome, BaseException)
            incoming.settled(items, retry, failed)
            if failed:
                if not isinstance(outcome, Behind):
                    self.flow.recorder.log("outbox_store_error", why=f"serving {len(items)} reminder(s): "
                                           f"{outcome}; kept and tried again")
                self.store.health.retries += len(items)
                if not retry:
                    self._dropped(incoming.keep(items))
                self._retry_later()
                return []
            if retry:
                self.retries = 0
            return self._serve_kept()

        return self._defer(lambda: incoming.write(serve, key, items, retry), done)

    def _serve_kept(self) -> list[Command]:
        """What the store could not take, once its retry is due and nothing else is being written."""
        batch = self.incoming.due() if self.retry_at is None else None
        return [self._capture(batch, retry=True)] if batch else []

    def _dropped(self, reminders: list[Reminder]) -> None:
        for reminder in reminders:
            self.flow.record("dropped", None, reminder, target="outbox",
                             why=f"the outbox store fails and {UNSAVED_KEPT} reminders wait for it already")

    def _retry_later(self) -> None:
        if self.retry_at is None:
            self.retry_at = self.flow.clock() + min(RETRY_LAST_S, RETRY_FIRST_S * 2 ** self.retries)
            self.retries += 1

    def _retry(self) -> list[Command]:
        """What the store failed, tried again."""
        self.retry_at = None
        self.stored = self.stored or self.unwritten
        self.unwritten = False
        out = self._serve_kept()
        if self.unmarked:
            rows, self.unmarked = sorted(self.unmarked), set()
            out.append(self._mark(rows))
        return out

    # -- timers ------------------------------------------------------------------------------
    def next_wake(self) -> float | None:
        times = [self.next_prune] + ([self.retry_at] if self.retry_at is not None else [])
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
        self.now = now
        out: list[Command] = []
        if now >= self.next_prune:
            self.next_prune = now + PRUNE_EVERY_S
            out.append(self._prune())
        if self.retry_at is not None and now >= self.retry_at:
            out += self._retry()
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

    def _pulls(self) -> bool:
        """Whether this flow polls: the route has an outbox, the era is settled, and the flow's
        state outlives its request (there is a later stream to deliver to)."""
        return self.pull is not None and self.ready and self.owned

    def _prune(self) -> Defer:
        wall_ms = int(self.wall() * 1000)
        serve, pull, store = self.serve, self.pull, self.store
        served_key = self.served_key if serve is not None and self.owned else None

        def work() -> tuple[int, int]:
            if served_key is not None:
                serve.prune(served_key, wall_ms)  # type: ignore[union-attr]
            if pull is None:
                return 0, 0
            _, abandoned = store.prune_inbox(wall_ms - 2 * pull.max_age_ms)
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

    def _start_at(self, now: float) -> float:
        """When polling may start: at once, except that the requests of one identity (each a flow of
        its own, 2026-07-28) start one poll per floor between them."""
        if self.flow.scope.kind != IDENTITY:
            return now
        return self.store.poll_start(self.source, now, self.cadence.floor_ms / 1000)

    def _start(self) -> list[Command]:
        """The first ready wake: discover events (2026-07-28 servers with the Events extension),
        else poll the declared resource."""
        if self.era == "modern" and self.server_events:
            return [self._request("events/list", {}, self._event_list)]
        self._poll_resource()
        return []

    def _poll_resource(self) -> None:
        if self.resource is None:
            self.flow.recorder.log("outbox_idle", why="the route names no outbox resource and the server offers "
                                   "no pollable events (io.modelcontextprotocol/events on 2026-07-28)")
            return
        self.pollers[self.resource] = Poller(self.cadence, self.now)

    def _request(self, method: str, params: dict[str, Any], on_answer: Callable[[dict[str, Any]], list[Command]],
                 extension: bool = False) -> Command:
        if self.era == "modern":
            meta = copy.deepcopy(self.envelope)
            if extension:
                caps = meta.setdefault(CLIENT_CAPS_KEY, {})
                caps.setdefault("extensions", {}).setdefault(EVENTS_EXTENSION, {})
            params = {**params, "_meta": meta}
        return self.flow.call(PEER, method, params, on_answer)

    def _poll(self, channel: str, poller: Poller) -> list[Command]:
        poller.start(self.now)
        store, source = self.store, self.source

        def read(cursor: Any) -> list[Command]:
            if isinstance(cursor, BaseException):
                poller.failed(self.now)
                self.flow.recorder.log("outbox_store_error", channel=channel, why=f"reading the cursor: {cursor}")
                return []
            pull = self.pull
            if channel.startswith("events:"):
                params = {"name": channel[len("events:"):], "arguments": {}, "cursor": cursor,
                          "maxEvents": pull.max_events, "maxAgeMs": pull.max_age_ms}
                call = self._request("events/poll", params, lambda answer: self._polled(answer, channel, cursor),
                                     extension=True)
            else:
                uri = read_uri(channel, cursor, pull.max_events, pull.max_age_ms)
                call = self._request("resources/read", {"uri": uri},
                                     lambda answer: self._polled(answer, channel, cursor))
            self.polls[call.id] = channel  # type: ignore[union-attr]
            return [call]

        return [self._defer(lambda: store.cursor(source, channel), read)]

    def _abandon(self, channel: str) -> None:
        """A read given up on: its late answer is dropped (the flow still routes it here)."""
        for own, ch in list(self.polls.items()):
            if ch == channel:
                del self.polls[own]
                self.abandoned[own] = None
        while len(self.abandoned) > ABANDONED_KEPT:
            self.abandoned.popitem(last=False)

    # -- answers to the proxy's own requests -------------------------------------------------
    def _polled(self, msg: dict[str, Any], channel: str, cursor: str | None) -> list[Command]:
        own = msg.get("id")
        if own in self.abandoned:
            del self.abandoned[own]
            return []  # a late answer to a read already given up on
        self.polls.pop(own, None)
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
        store, source, wall_ms = self.store, self.source, int(self.wall() * 1000)
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

    def _event_list(self, msg: dict[str, Any]) -> list[Command]:
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
            return [self._request("events/list", {"cursor": next_cursor}, self._event_list)]
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

        async def rows(found: Any) -> list[Command]:
            self.reading = False
            if isinstance(found, BaseException):
                self.stored = True  # try again next wake
                self.flow.recorder.log("outbox_store_error", why=str(found))
                self._retry_later()
                return []
            return await self._hand_over(found)

        return [self._defer(lambda: store.undelivered(source), rows)]

    async def _hand_over(self, rows: list[tuple[int, str, str, str]]) -> list[Command]:
        out: list[Command] = []
        gone: list[int] = []
        method = "events/poll" if self.server_events and self.era == "modern" else "resources/read"
        claimed = self.store.claimed
        for rowid, event_id, kind, payload in rows:
            if rowid in claimed:
                continue  # handed over already (here, or by another flow of this scope), not yet written
            reminder = self._reminder(event_id, kind, payload)
            if reminder is None:
                gone.append(rowid)
                continue
            claimed.add(rowid)
            if self.serve is not None and self.flow.target() not in HOST_CODECS:
                out.append(self._serve_instead(rowid, reminder, method))  # a host that does not listen reads it there
                continue
            self.handed.add(rowid)
            out += await self.flow.deliver(reminder, method, "outbox", Receipt(self.name, rowid))
        if gone:
            claimed.update(gone)
            out.append(self._mark(gone))
        return out

    def _serve_instead(self, rowid: int, reminder: Reminder, method: str) -> Defer:
        """A pulled row moved into the served outbox, in one transaction (it is in one or the other)."""
        serve, key, store = self.serve, self.served_key, self.store
        assert serve is not None
        now_ms = int(self.wall() * 1000)
        self.flow.record("queued", method, reminder, source="outbox", target="outbox")

        def done(outcome: Any) -> list[Command]:
            store.claimed.discard(rowid)
            if isinstance(outcome, BaseException):
                self.stored = True  # read again once the store is back
                self.flow.recorder.log("outbox_store_error", id=reminder.id, why=f"serving: {outcome}")
                self._retry_later()
            return []

        return self._defer(lambda: serve.move(key, rowid, reminder, now_ms), done)

    # -- receipts: what the transport wrote --------------------------------------------------
    def on_written(self, receipts: Sequence[Receipt]) -> list[Command]:
        """Rows whose reminder is on the host's connection (or was decided without a write): done."""
        rows = [r.token for r in receipts if r.owner == self.name]
        if not rows:
            return []
        self.handed.difference_update(rows)
        if self.closed:  # written as its session ended: nobody performs commands for it any more
            self.store.lane.submit(run_quietly, self.store.mark_delivered, rows)
            return []
        return [self._mark(rows)]

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

    def resumed(self) -> None:
        """A 2025-11-25 session the proxy took up again (a restart) without its handshake: its era is
        settled, so it polls and gets what is stored for it."""
        if self.pull is not None and not self.ready:
            self._settle("legacy")

    def close(self) -> None:
        """Rows handed over and never written go back to their scope; a mark that could not commit is
        tried once more, on the store's lane (nothing waits for it)."""
        self.closed = True
        self.store.claimed.difference_update(self.handed)
        self.handed.clear()
        if self.unmarked:
            rows, store = sorted(self.unmarked), self.store
            self.unmarked.clear()
            store.lane.submit(run_quietly, store.mark_delivered, rows)
        waiting = self.incoming.abandon()
        if waiting:  # not written yet: once more, nothing waits for it
            self.store.lane.submit(run_quietly, self.serve.capture, self.served_key, waiting)  # type: ignore[union-attr]

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


def run_quietly(call: Callable[..., Any], *args: Any) -> None:
    """``call(*args)`` where nothing waits for it: a store failure is the store's `health` to tell."""
    try:
        call(*args)
    except sqlite3.Error:
        pass


def _merge_capability(found: dict[str, Any] | None) -> dict[str, Any]:
    if found is None:
        return copy.deepcopy(REMINDER_CAPABILITY)
    merged = dict(found)
    merged["emit"] = True
    for key in ("propagate", "roleHints"):
        values = list(found.get(key) or [])
        merged[key] = values + [v for v in REMINDER_CAPABILITY[key] if v not in values]
    return merged
