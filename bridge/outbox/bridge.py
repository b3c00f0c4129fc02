"""`OutboxBridge`: the outbox rules of one MCP connection, plugged into `McpFlow` by delegation.

The MCP flow hands every parsed host and server message to `on_host` / `on_peer` together
with its own handler (`next`), calls `on_tick` from its tick and `on_reminder` for each
reminder a server pushes.  Everything outbox-specific happens here:

**Outbox → reminders.**  Once the host's handshake has committed the connection to an era
(2025-11-25: after `notifications/initialized`; 2026-07-28: after a successful
`server/discover`, or the host's first request carrying the `_meta` envelope), the proxy polls
the server on its own: `resources/read` of `<resource>?cursor=…&maxEvents=…&maxAgeMs=…`, or, on
a 2026-07-28 server that advertises `io.modelcontextprotocol/events`, `events/poll` for each
event that offers poll delivery.  Its requests use the flow's own ids
(`reminder-bridge:N`, never the host's) and their answers are consumed here, never forwarded.
On 2026-07-28 they carry the `_meta` envelope the host's own requests carry.  Each answer's
events are stored, with the new cursor, in one transaction (`store.Store.accept`); what is
stored and not yet handed over goes to the host as reminders in its dialect (or its fallback),
and is marked delivered as it is handed over.

**Reminders → outbox.**  A route with `serve_outbox` records every reminder the server pushes
in its own outbox resource, lists it in `resources/list` and answers its reads itself.  A host
that listens for reminders still gets them pushed; a host that does not (dialect `none`) gets
them from the outbox instead of the tool-result fallback.
"""
from __future__ import annotations

import copy
import json
import sqlite3
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from bridge.dialects.mcp import CODECS
from bridge.model import Reminder, uuid7
from bridge.outbox.declaration import read_manifest, read_uri
from bridge.outbox.events import Malformed, answer_from_read, gap_reminder, parse_answer, parse_event, to_reminder
from bridge.outbox.poller import Cadence, Poller
from bridge.outbox.served import BadRead, ServedOutbox
from bridge.outbox.store import Store, default_path
from bridge.pipeline import HOST, PEER, Outgoing, error_response

if TYPE_CHECKING:
    from bridge.pipeline.mcp import McpFlow

PROTOCOL_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
EVENTS_EXTENSION = "io.modelcontextprotocol/events"
#: What the proxy promises a listening host about the reminders it makes from events.
REMINDER_CAPABILITY = {"emit": True, "propagate": ["session"], "roleHints": ["user_block"]}
PRUNE_EVERY_S = 600.0
ABANDONED_KEPT = 256

Next = Callable[[dict[str, Any]], Outgoing | None]


class OutboxBridge:
    """Per connection; built by `for_flow` only when the route has `outbox` or `serve_outbox`."""

    @classmethod
    def for_flow(cls, flow: "McpFlow", wall: Callable[[], float] = time.time) -> "OutboxBridge | None":
        pull = getattr(flow.settings, "outbox", None)
        serve = getattr(flow.settings, "serve_outbox", None)
        if pull is None and serve is None:
            return None
        if flow.stage == "observe":
            flow.recorder.log("outbox_off", why="stage is observe: the proxy sends and answers nothing of its own")
            return None
        resource = None
        try:
            if pull is not None:
                resource = pull.resource or (read_manifest(pull.manifest) if pull.manifest else None)
        except ValueError as exc:
            flow.recorder.log("outbox_off", why=f"outbox.manifest: {exc}")
            return None
        path = next((p for p in (pull and pull.store, serve and serve.store) if p), None) or default_path()
        try:
            store = Store(path)
        except (OSError, sqlite3.Error) as exc:
            flow.recorder.log("outbox_off", why=f"cannot open the outbox store {str(path)!r}: {exc}")
            return None
        return cls(flow, store, pull=pull, resource=resource, serve=serve, wall=wall)

    def __init__(self, flow: "McpFlow", store: Store, *, pull: Any = None, resource: str | None = None,
                 serve: Any = None, wall: Callable[[], float] = time.time):
        self.flow = flow
        self.store = store
        self.wall = wall
        self.now = 0.0  # the last tick's monotonic clock: the only clock the state machines see
        route = flow.recorder.route
        # era and handshake
        self.era: str | None = None
        self.ready = False
        self.envelope: dict[str, Any] = {}
        self.initialize_ids: set[Any] = set()
        self.discover_ids: set[Any] = set()
        self.server_events = False
        # outbox → reminders
        self.pull = pull
        self.resource = resource
        self.source = f"{route}|{resource or 'events'}"
        self.cadence = Cadence(pull.poll_floor_ms, pull.poll_ceiling_ms) if pull else Cadence()
        self.pollers: dict[str, Poller] = {}
        self.started = False
        self.event_names: list[str] = []
        self.requests: dict[str, tuple[str, str | None, str | None]] = {}  # own id → (purpose, channel, cursor)
        self.abandoned: OrderedDict[str, None] = OrderedDict()
        self.queued: dict[int, Reminder] = {}  # stored rows waiting in the flow's tool-result queue
        self.stored = True  # the store may hold undelivered events (a restart): look once
        self.next_prune = 0.0
        # reminders → outbox
        self.serve = ServedOutbox(serve.resource, serve.retention_s, store, f"{route}|{serve.resource}") if serve else None
        self.list_ids: set[Any] = set()

    # -- what the flow asks ------------------------------------------------------------------
    def host_markers(self) -> tuple[bytes, ...]:
        """Extra pre-filter markers for host frames: `initialized` until the era is settled, and
        `resources` while the proxy serves an outbox of its own."""
        markers: tuple[bytes, ...] = ()
        if self.pull is not None and not self.ready:
            markers += (b"initialized",)
        if self.serve is not None:
            markers += (b"resources",)
        return markers

    # -- host → server -----------------------------------------------------------------------
    def on_host(self, msg: dict[str, Any], next: Next) -> Outgoing | None:
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method == "initialize" and "id" in msg:
            self.initialize_ids.add(_key(msg["id"]))
        elif method == "server/discover" and "id" in msg:
            self.discover_ids.add(_key(msg["id"]))
            self._copy_envelope(meta)
        elif method == "notifications/initialized" and not self.ready:
            self._settle("legacy")
        elif PROTOCOL_KEY in meta and "id" in msg:
            self._copy_envelope(meta)
            if not self.ready:
                self._settle("modern")  # the host committed the connection to 2026-07-28 without a probe
        if self.serve is not None:
            if method == "resources/read" and self.serve.owns(params.get("uri")) and "id" in msg:
                return self._answer_read(msg, params["uri"], next)
            if method == "resources/list" and "id" in msg:
                out = next(msg)
                self.list_ids.add(_key(msg["id"]))
                self.flow.expect_response(HOST, msg, "outbox:list")  # so the answer is parsed, not passed
                return out
        return next(msg)

    def _copy_envelope(self, meta: dict[str, Any]) -> None:
        """The 2026-07-28 `_meta` keys a request must carry, as the host's own requests carry them."""
        if PROTOCOL_KEY in meta:
            self.envelope = {k: copy.deepcopy(meta[k]) for k in (PROTOCOL_KEY, CLIENT_CAPS_KEY, CLIENT_INFO_KEY)
                             if k in meta}
            self.envelope.setdefault(CLIENT_CAPS_KEY, {})

    def _settle(self, era: str) -> None:
        self.era = era
        self.ready = True
        self.flow._watch_host()  # the `initialized` marker is no longer needed

    def _answer_read(self, msg: dict[str, Any], uri: str, next: Next) -> Outgoing:
        """The host reads the proxy's own outbox: answered here, never forwarded to the server."""
        next(msg)  # the flow sees the request as it sees any other (and may wait for its answer)
        try:
            answer = self.serve.read(uri, int(self.wall() * 1000))  # type: ignore[union-attr]
        except BadRead as exc:
            response = error_response(msg["id"], -32602, f"cannot read {uri}: {exc}")
        except sqlite3.Error as exc:
            self.flow.recorder.log("outbox_store_error", why=f"reading the served outbox: {exc}")
            response = error_response(msg["id"], -32603, f"cannot read {uri}: the proxy's outbox store failed")
        else:
            result: dict[str, Any] = {"contents": [{"uri": uri, "mimeType": "application/json",
                                                    "text": json.dumps(answer, ensure_ascii=False)}]}
            if self.era == "modern":
                result.update(resultType="complete", ttlMs=0, cacheScope="private")
            response = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
            for _ in answer["events"]:
                self.flow.record("attached", "resources/read", None, source="outbox", target="host")
        self.flow.on_peer(response)  # settles what the flow waited for, as if the server had answered
        return [(HOST, response)]

    # -- server → host -----------------------------------------------------------------------
    def on_peer(self, msg: dict[str, Any], next: Next) -> Outgoing | None:
        msg_id = msg.get("id")
        if "method" not in msg and isinstance(msg_id, str) and (msg_id in self.requests or msg_id in self.abandoned):
            return self._own_response(msg)
        out = next(msg)
        key = _key(msg_id) if msg_id is not None and "method" not in msg else None
        if key is not None and (key in self.initialize_ids or key in self.discover_ids):
            out = self._handshake_result(msg, key, out)
        elif key is not None and key in self.list_ids:
            self.list_ids.discard(key)
            out = self._list_result(msg, out)
        self._sync_queued()
        return out

    def _handshake_result(self, msg: dict[str, Any], key: Any, out: Outgoing | None) -> Outgoing | None:
        discover = key in self.discover_ids
        self.initialize_ids.discard(key)
        self.discover_ids.discard(key)
        result = msg.get("result")
        if not isinstance(result, dict):
            return out  # a failed probe: the host falls back to initialize, and so do we
        extensions = result.get("capabilities", {}).get("extensions") if isinstance(result.get("capabilities"), dict) else None
        if discover:
            self.server_events = isinstance(extensions, dict) and EVENTS_EXTENSION in extensions
            if not self.ready:
                self._settle("modern")
        if not isinstance(result.get("capabilities"), dict):
            return out

        def patch(response: dict[str, Any]) -> None:
            caps = response["result"]["capabilities"]
            if self.serve is not None and not isinstance(caps.get("resources"), dict):
                caps["resources"] = {}
            target = self.flow.host_dialect
            if self.pull is not None and target in CODECS:
                codec = CODECS[target]
                codec.write_capability(caps, _merge_capability(codec.read_capability(caps)))

        return _patched(msg, out, patch)

    def _list_result(self, msg: dict[str, Any], out: Outgoing | None) -> Outgoing | None:
        """`resources/list`: the proxy's outbox joins the server's last page (or is the only entry
        when the server has no resources at all)."""
        listing = self.serve.listing()  # type: ignore[union-attr]
        error = msg.get("error")
        if isinstance(error, dict) and error.get("code") == -32601:
            result: dict[str, Any] = {"resources": [listing]}
            if self.era == "modern":
                result.update(resultType="complete", ttlMs=0, cacheScope="private")
            replacement = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
            return [(to, replacement if to == HOST else data) for to, data in (out or [(HOST, None)])]
        result = msg.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("resources"), list) or result.get("nextCursor"):
            return out

        def patch(response: dict[str, Any]) -> None:
            resources = response["result"]["resources"]
            if not any(isinstance(r, dict) and r.get("uri") == listing["uri"] for r in resources):
                resources.append(listing)

        return _patched(msg, out, patch)

    # -- reminders the server pushes ---------------------------------------------------------
    def on_reminder(self, reminder: Reminder, method: str | None, source: str, target: str) -> Outgoing | None:
        """Record a server's reminder in the proxy's outbox.  None: deliver it as usual as well;
        []: a host that does not listen reads it from the outbox, and nothing else happens."""
        if self.serve is None:
            return None
        try:
            self.serve.capture(reminder, int(self.wall() * 1000))
        except sqlite3.Error as exc:  # the outbox could not take it: the flow's own fallback applies
            self.flow.recorder.log("outbox_store_error", id=reminder.id, why=f"serving: {exc}")
            return None
        self.flow.record("queued", method, reminder, source=source, target="outbox")
        return None if target in CODECS else []

    # -- ticks -------------------------------------------------------------------------------
    def on_tick(self, now: float) -> Outgoing | None:
        self.now = now
        if now >= self.next_prune:
            self.next_prune = now + PRUNE_EVERY_S
            self._prune()
        if self.pull is None or not self.ready:
            return None
        out: Outgoing = []
        if not self.started:
            self.started = True
            self._start(out)
        self._sync_queued()
        out += self._deliver()
        for channel, poller in self.pollers.items():
            if poller.expired(now):
                self._abandon(channel)
                poller.failed(now)
                self.flow.recorder.log("outbox_poll_failed", channel=channel, why="no answer within "
                                       f"{self.cadence.timeout_ms} ms; next read in {poller.wait_ms(now):.0f} ms")
            if poller.due(now):
                out.append(self._poll(channel, poller))
        return out or None

    def _prune(self) -> None:
        wall_ms = int(self.wall() * 1000)
        try:
            if self.serve is not None:
                self.serve.prune(wall_ms)
            if self.pull is not None:
                self.store.prune_inbox(wall_ms - 2 * self.pull.max_age_ms)
        except sqlite3.Error as exc:
            self.flow.recorder.log("outbox_store_error", why=f"pruning: {exc}")

    def _start(self, out: Outgoing) -> None:
        """The first ready tick: discover events (2026-07-28 servers with the Events extension),
        else poll the declared resource."""
        if self.era == "modern" and self.server_events:
            out.append(self._request("events/list", {}, ("events/list", None, None)))
        else:
            self._poll_resource()

    def _poll_resource(self) -> None:
        if self.resource is None:
            self.flow.recorder.log("outbox_idle", why="the route names no outbox resource and the server offers "
                                   "no pollable events (io.modelcontextprotocol/events on 2026-07-28)")
            return
        self.pollers[self.resource] = Poller(self.cadence, self.now)

    def _request(self, method: str, params: dict[str, Any], purpose: tuple[str, str | None, str | None],
                 extension: bool = False) -> tuple[str, dict[str, Any]]:
        msg_id = self.flow.own_id()
        self.requests[msg_id] = purpose
        if self.era == "modern":
            meta = copy.deepcopy(self.envelope)
            if extension:
                caps = meta.setdefault(CLIENT_CAPS_KEY, {})
                caps.setdefault("extensions", {}).setdefault(EVENTS_EXTENSION, {})
            params = {**params, "_meta": meta}
        return (PEER, {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def _poll(self, channel: str, poller: Poller) -> tuple[str, dict[str, Any]]:
        poller.start(self.now)
        cursor = self.store.cursor(self.source, channel)
        pull = self.pull
        if channel.startswith("events:"):
            params = {"name": channel[len("events:"):], "arguments": {}, "cursor": cursor,
                      "maxEvents": pull.max_events, "maxAgeMs": pull.max_age_ms}
            return self._request("events/poll", params, ("poll", channel, cursor), extension=True)
        uri = read_uri(channel, cursor, pull.max_events, pull.max_age_ms)
        return self._request("resources/read", {"uri": uri}, ("poll", channel, cursor))

    def _abandon(self, channel: str) -> None:
        for msg_id, (_, ch, _) in list(self.requests.items()):
            if ch == channel:
                del self.requests[msg_id]
                self.abandoned[msg_id] = None
        while len(self.abandoned) > ABANDONED_KEPT:
            self.abandoned.popitem(last=False)

    # -- answers to the proxy's own requests -------------------------------------------------
    def _own_response(self, msg: dict[str, Any]) -> Outgoing:
        msg_id = msg["id"]
        if msg_id in self.abandoned:
            del self.abandoned[msg_id]
            return []  # a late answer to a read already given up on: dropped, never forwarded
        purpose, channel, cursor = self.requests.pop(msg_id)
        if purpose == "events/list":
            return self._event_list(msg)
        poller = self.pollers.get(channel or "")
        if poller is None:
            return []
        method = "events/poll" if (channel or "").startswith("events:") else "resources/read"
        try:
            if "error" in msg:
                error = msg["error"] if isinstance(msg["error"], dict) else {}
                raise Malformed(f"the server answered error {error.get('code')}: {error.get('message')}")
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
        try:
            self.store.accept(self.source, channel or "", items, answer.cursor or last_event_cursor,
                              int(self.wall() * 1000))
            self.stored = self.stored or bool(items)
        except sqlite3.Error as exc:
            poller.failed(self.now)
            self.flow.recorder.log("outbox_store_error", channel=channel, why=f"{exc}; the cursor stays")
            return []
        poller.succeeded(self.now, events=len(answer.events), has_more=answer.has_more,
                         next_poll_ms=answer.next_poll_ms)
        out = self._deliver()
        if poller.due(self.now):  # hasMore: read again at once
            out.append(self._poll(channel or "", poller))
        return out

    def _event_list(self, msg: dict[str, Any]) -> Outgoing:
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
            return [self._request("events/list", {"cursor": next_cursor}, ("events/list", None, None))]
        if not self.event_names:
            self._poll_resource()
        for name in self.event_names:
            self.pollers[f"events:{name}"] = Poller(self.cadence, self.now)
        return [self._poll(channel, poller) for channel, poller in self.pollers.items() if poller.due(self.now)]

    # -- delivery to the host ----------------------------------------------------------------
    def _deliver(self) -> Outgoing:
        """Everything stored and not yet handed over, oldest first, in the host's dialect."""
        if not self.stored:
            return []
        self.stored = False
        try:
            rows = self.store.undelivered(self.source)
        except sqlite3.Error as exc:
            self.stored = True  # try again next tick
            self.flow.recorder.log("outbox_store_error", why=str(exc))
            return []
        out: Outgoing = []
        done: list[int] = []
        for rowid, event_id, kind, payload in rows:
            if rowid in self.queued:
                continue
            reminder = self._reminder(event_id, kind, payload)
            if reminder is None:
                done.append(rowid)
                continue
            method = "events/poll" if self.server_events and self.era == "modern" else "resources/read"
            try:
                handed = self._hand_over(reminder, method)
            except sqlite3.Error as exc:  # the served outbox could not take it: retried next tick
                self.stored = True
                self.flow.recorder.log("outbox_store_error", id=reminder.id, why=f"serving: {exc}")
                break
            if handed is None:
                self.queued[rowid] = reminder
                continue
            out += handed
            done.append(rowid)
        if done:
            self._mark_delivered(done)
        return out

    def _mark_delivered(self, rowids: list[int]) -> None:
        try:
            self.store.mark_delivered(rowids)
        except sqlite3.Error as exc:  # handed over all the same; a restart would hand them over again
            self.flow.recorder.log("outbox_store_error", why=f"marking {len(rowids)} event(s) delivered: {exc}")

    def _reminder(self, event_id: str, kind: str, payload: str) -> Reminder | None:
        try:
            data = json.loads(payload)
            if kind == "gap":
                return gap_reminder(self.source, event_id, data.get("cursor"), self.resource or "the server's events")
            return to_reminder(self.source, parse_event(data))
        except (ValueError, Malformed) as exc:  # only if the store was edited by hand
            self.flow.recorder.log("outbox_store_error", why=f"stored event {event_id!r} unreadable: {exc}")
            return None

    def _hand_over(self, reminder: Reminder, method: str) -> Outgoing | None:
        """Messages for the host ([] when refused, dropped or kept in the served outbox), or None when
        the reminder waits in the flow's tool-result queue (delivered once it leaves the queue)."""
        flow = self.flow
        target = flow._target()
        queued = target not in CODECS and self.serve is None and flow._fallback() == "tool_result"
        policed = self._police(reminder, method, target, queued)
        if policed is None:
            return []  # refused, limited or held by the budget: the policy recorded why
        reminder = policed
        if target in CODECS:
            flow.record("rewritten", method, reminder, source="outbox", target=target)
            return [(HOST, self._encode(reminder, target))]
        if self.serve is not None:
            self.serve.capture(reminder, int(self.wall() * 1000))
            flow.record("queued", method, reminder, source="outbox", target="outbox")
            return []
        if queued:
            flow.pending.append(reminder)
            flow.record("queued", method, reminder, source="outbox", target="none")
            return None
        flow.record("dropped", method, reminder, source="outbox", target="none", why="host has no reminder support")
        return []

    def _encode(self, reminder: Reminder, target: str) -> dict[str, Any]:
        msg = CODECS[target].encode(reminder)
        stamp = getattr(self.flow, "stamp", None)  # trace context, when the telemetry layer writes it
        return stamp(msg) if callable(stamp) else msg

    def _police(self, reminder: Reminder, method: str, target: str, queued: bool) -> Reminder | None:
        """Budgets and trust limits, like any reminder from the server: the flow's `police` when the
        policy layer provides one.  These are notifications: refused means dropped, or held by
        `coalesce` and sent when the budget allows."""
        police = getattr(self.flow, "police", None)
        if not callable(police):
            return reminder
        notification = {"jsonrpc": "2.0", "method": method}

        def deliver(held: Reminder) -> Outgoing | None:
            now = self.flow._target()
            if now in CODECS:
                self.flow.record("rewritten", method, held, source="outbox", target=now)
                return [(HOST, self._encode(held, now))]
            return []

        pending = len(self.flow.pending) + len(getattr(self.flow, "held", ())) if queued else None
        policed, _ = police(notification, reminder, method, origin=PEER, deliver=deliver, source="outbox",
                            target=target, pending=pending, request=False)
        return policed

    def _sync_queued(self) -> None:
        """Rows whose reminders have left the flow's tool-result queue (rendered, or evicted) are done."""
        if not self.queued:
            return
        waiting = {id(r) for r in self.flow.pending}
        done = [rowid for rowid, reminder in self.queued.items() if id(reminder) not in waiting]
        if done:
            self._mark_delivered(done)
            for rowid in done:
                del self.queued[rowid]


def _key(msg_id: Any) -> Any:
    return (type(msg_id).__name__, msg_id)


def _merge_capability(found: dict[str, Any] | None) -> dict[str, Any]:
    if found is None:
        return copy.deepcopy(REMINDER_CAPABILITY)
    merged = dict(found)
    merged["emit"] = True
    for key in ("propagate", "roleHints"):
        values = list(found.get(key) or [])
        merged[key] = values + [v for v in REMINDER_CAPABILITY[key] if v not in values]
    return merged


def _patched(msg: dict[str, Any], out: Outgoing | None, patch: Callable[[dict[str, Any]], None]) -> Outgoing:
    """The flow's output with the message toward the host patched (a copy when the flow forwarded
    the frame as it came)."""
    if out is None:
        out = [(HOST, None)]
    patched: Outgoing = []
    for to, data in out:
        if to == HOST and (data is None or (isinstance(data, dict) and data.get("id") == msg.get("id"))):
            data = copy.deepcopy(msg) if data is None else data
            patch(data)
        patched.append((to, data))
    return patched
