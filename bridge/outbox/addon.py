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
once handed over, so each event reaches a host exactly once, across restarts too.

**Reminders → outbox.**  A route with `serve_outbox` records every reminder the server pushes
in its own outbox resource, lists it in `resources/list` and answers its reads itself. A host
that listens for reminders still gets them pushed; a host that does not (dialect `none`) gets
them from the outbox instead of the tool-result fallback.
"""
from __future__ import annotations

import copy
import json
import sqlite3
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from bridge.dialects.mcp import CODECS, HOST_CODECS
from bridge.jsonrpc import error_response
from bridge.model import Reminder, uuid7
from bridge.outbox.declaration import read_manifest, read_uri
from bridge.outbox.events import Malformed, answer_from_read, gap_reminder, parse_answer, parse_event, to_reminder
from bridge.outbox.poller import Cadence, Poller
from bridge.outbox.served import BadRead, ServedOutbox
from bridge.outbox.store import Store, default_path
from bridge.pipeline.addons import AddOn
from bridge.pipeline.commands import HOST, PEER, Command, Defer
from bridge.pipeline.negotiation import observes

PROTOCOL_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
EVENTS_EXTENSION = "io.modelcontextprotocol/events"
#: What the proxy promises a listening host about the reminders it makes from events.
REMINDER_CAPABILITY = {"emit": True, "propagate": ["session"], "roleHints": ["user_block"]}
PRUNE_EVERY_S = 600.0
ABANDONED_KEPT = 256
HANDSHAKES = ("initialize", "server/discover")


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
    return OutboxAddOn(store, route=recorder.route, pull=pull, resource=resource, serve=serve, wall=wall)


_STORES: "weakref.WeakKeyDictionary[Any, dict[str, Store]]" = weakref.WeakKeyDictionary()


def _open(recorder: Any, path: Any) -> Store:
    """One `Store` per file and route (its recorder): every session of a route shares its connection."""
    stores = _STORES.setdefault(recorder, {})
    key = str(path)
    if key not in stores:
        stores[key] = Store(path)
    return stores[key]


class OutboxAddOn(AddOn):
    """Per connection (stdio) or session (HTTP); `outbox_for` builds one when the route has an outbox."""

    def __init__(self, store: Store, *, route: str, pull: Any = None, resource: str | None = None,
                 serve: Any = None, wall: Callable[[], float] = time.time):
        self.store = store
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
        self.source = f"{route}|{resource or 'events'}"
        self.cadence = Cadence(pull.poll_floor_ms, pull.poll_ceiling_ms) if pull else Cadence()
        self.pollers: dict[str, Poller] = {}
        self.started = False
        self.event_names: list[str] = []
        self.polls: dict[str, str] = {}  # own call id → channel, for reads in flight
        self.abandoned: OrderedDict[str, None] = OrderedDict()
        self.waiting: set[int] = set()  # stored rows handed to the flow and not yet taken by the host
        self.stored = True  # the store may hold undelivered events (a restart): look once
        self.reading = False  # a read of undelivered rows is under way
        self.next_prune = 0.0
        # reminders → outbox
        self.serve = ServedOutbox(serve.resource, serve.retention_s, store, f"{route}|{serve.resource}") if serve else None

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
                return [self._answer_read(msg, params["uri"])]
            if method == "resources/list":
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
        """The host reads the proxy's own outbox: answered here (off the loop), never forwarded."""
        serve = self.serve
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

        return Defer(lambda: serve.read(uri, now_ms), done)

    # -- responses toward the host -----------------------------------------------------------
    def on_response(self, request_method: str | None, response: dict[str, Any]) -> dict[str, Any] | None:
        if request_method in HANDSHAKES:
            return self._handshake_result(request_method, response)
        if request_method == "resources/list":
            return self._list_result(response)
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

    def _list_result(self, response: dict[str, Any]) -> dict[str, Any] | None:
        """`resources/list`: the proxy's outbox joins the server's last page (or is the only entry
        when the server has no resources at all)."""
        listing = self.serve.listing()  # type: ignore[union-attr]
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") == -32601:
            result: dict[str, Any] = {"resources": [listing]}
            if self.era == "modern":
                result.update(resultType="complete", ttlMs=0, cacheScope="private")
            return {"jsonrpc": "2.0", "id": response.get("id"), "result": result}
        result = response.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("resources"), list) or result.get("nextCursor"):
            return None
        if not any(isinstance(r, dict) and r.get("uri") == listing["uri"] for r in result["resources"]):
            result["resources"].append(listing)
        return response

    # -- reminders the server pushes ---------------------------------------------------------
    def on_reminder(self, reminder: Reminder, method: str | None, source: str,
                    target: str) -> tuple[list[Command], bool]:
        """Record a server's reminder in the proxy's outbox; a host that listens gets it pushed as
        usual too, one that does not reads it from the outbox instead (kept)."""
        if self.serve is None:
            return [], False
        serve = self.serve
        now_ms = int(self.wall() * 1000)

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):  # the outbox could not take it
                self.flow.recorder.log("outbox_store_error", id=reminder.id, why=f"serving: {outcome}")
            return []

        self.flow.record("queued", method, reminder, source=source, target="outbox")
        return [Defer(lambda: serve.capture(reminder, now_ms), done)], target not in HOST_CODECS

    # -- timers ------------------------------------------------------------------------------
    def next_wake(self) -> float | None:
        times = [self.next_prune]
        if self.pull is not None and self.ready:
            if not self.started or (self.stored and not self.reading):
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
        if self.pull is None or not self.ready:
            return out
        if not self.started:
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

    def _prune(self) -> Defer:
        wall_ms = int(self.wall() * 1000)
        serve, pull, store = self.serve, self.pull, self.store

        def work() -> None:
            if serve is not None:
                serve.prune(wall_ms)
            if pull is not None:
                store.prune_inbox(wall_ms - 2 * pull.max_age_ms)

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):
                self.flow.recorder.log("outbox_store_error", why=f"pruning: {outcome}")
            return []

        return Defer(work, done)

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

        return [Defer(lambda: store.cursor(source, channel), read)]

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

        return [Defer(lambda: store.accept(source, channel, items, new_cursor, wall_ms), stored)]

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
        """Everything stored and not yet handed over, oldest first (read off the loop)."""
        if not self.stored or self.reading:
            return []
        self.stored = False
        self.reading = True
        store, source = self.store, self.source

        async def rows(found: Any) -> list[Command]:
            self.reading = False
            if isinstance(found, BaseException):
                self.stored = True  # try again next wake
                self.flow.recorder.log("outbox_store_error", why=str(found))
                return []
            return await self._hand_over(found)

        return [Defer(lambda: store.undelivered(source), rows)]

    async def _hand_over(self, rows: list[tuple[int, str, str, str]]) -> list[Command]:
        out: list[Command] = []
        gone: list[int] = []
        method = "events/poll" if self.server_events and self.era == "modern" else "resources/read"
        for rowid, event_id, kind, payload in rows:
            if rowid in self.waiting:
                continue  # already handed to the flow, waiting for a tool result
            reminder = self._reminder(event_id, kind, payload)
            if reminder is None:
                gone.append(rowid)
                continue
            if self.serve is not None and self.flow.target() not in HOST_CODECS:
                out.append(self._serve_instead(reminder, method))  # a host that does not listen reads it there
                gone.append(rowid)
                continue
            self.waiting.add(rowid)
            handed = await self.flow.deliver(reminder, method, "outbox", lambda rowid=rowid: self._handed(rowid))
            if handed is not None:
                out += handed
        if gone:
            out.append(self._mark(gone))
        return out

    def _serve_instead(self, reminder: Reminder, method: str) -> Defer:
        serve = self.serve
        assert serve is not None
        now_ms = int(self.wall() * 1000)
        self.flow.record("queued", method, reminder, source="outbox", target="outbox")

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):
                self.stored = True  # retried on the next wake
                self.flow.recorder.log("outbox_store_error", id=reminder.id, why=f"serving: {outcome}")
            return []

        return Defer(lambda: serve.capture(reminder, now_ms), done)

    def _handed(self, rowid: int) -> list[Command]:
        """The host has the reminder (or the policy refused it): the row is done."""
        self.waiting.discard(rowid)
        return [self._mark([rowid])]

    def _mark(self, rowids: list[int]) -> Defer:
        store = self.store

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):  # handed over all the same; a restart would hand them over again
                self.flow.recorder.log("outbox_store_error", why=f"marking {len(rowids)} event(s) delivered: {outcome}")
            return []

        return Defer(lambda: store.mark_delivered(rowids), done)

    def _reminder(self, event_id: str, kind: str, payload: str) -> Reminder | None:
        try:
            data = json.loads(payload)
            if kind == "gap":
                return gap_reminder(self.source, event_id, data.get("cursor"), self.resource or "the server's events")
            return to_reminder(self.source, parse_event(data))
        except (ValueError, Malformed) as exc:  # only if the store was edited by hand
            self.flow.recorder.log("outbox_store_error", why=f"stored event {event_id[:80]!r} unreadable: "
                                   f"{type(exc).__name__}")
            return None


def _merge_capability(found: dict[str, Any] | None) -> dict[str, Any]:
    if found is None:
        return copy.deepcopy(REMINDER_CAPABILITY)
    merged = dict(found)
    merged["emit"] = True
    for key in ("propagate", "roleHints"):
        values = list(found.get(key) or [])
        merged[key] = values + [v for v in REMINDER_CAPABILITY[key] if v not in values]
    return merged
