"""The console's live feed, dialect statistics and charts: one `Feed`, attached to Recorders as a listener.

`Recorder.reminder`, `Recorder.handshake` and the refusal counters call `Feed.decision`,
`Feed.handshake` and `Feed.refusal` inside the proxy's hot path, so all are cheap, never await and
encode no JSON: a decision is counted into its minute (`bridge.console.timeline`) and into the
readiness statistics (only when it is legacy input from the host side), a handshake into the hosts
seen (told apart by `identity`) and, when someone watches `/api/events`, one summary of either is
made and appended to each watcher's bounded queue.
A summary holds only what the event shows (spec §13), so a queue pins no peer data: the body's
size, never the body (unless `show_bodies`, and then shortened), a shortened client name, id and
reason, a keyed hash of the session.  With nobody watching, a decision costs a few comparisons and
one count into its minute.
JSON is encoded by each watcher's own writer task, for the events it actually sends.

Each watcher's queue is bounded in count and in bytes.  When it is full the oldest events are
dropped and counted, and the count is sent to it (`event: lost`).  A watcher that stopped reading
(a whole queue's worth lost while one write to it waits) is hung up on and counted; a browser
reconnects by itself.  The proxy never waits for a watcher.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

from bridge.console.timeline import Timeline, refusal_cause
from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.display import MAX_SHOWN_ID, clip
from bridge.state.scope import digest

#: Events one watcher may have waiting before the oldest are dropped (and counted as lost).
QUEUE = 1000
#: ... and their bytes (each event counted as its text fields plus `EVENT_OVERHEAD`).
QUEUE_BYTES = 1024 * 1024
EVENT_OVERHEAD = 256
#: What a summary keeps of peer text, in characters: client names (also in the statistics), reasons
#: and bodies (`show_bodies` only); ids, dedupe keys and methods keep `MAX_SHOWN_ID`.
MAX_NAME = 128
MAX_REASON = 500
MAX_BODY = 4096
#: One write to a watcher: at most this many bytes of events.
BATCH_BYTES = 64 * 1024
#: Watchers of `/api/events` at once; more are refused (503).
MAX_SUBSCRIBERS = 32
#: Hosts (and peers) told apart per route and side (the least recently seen are forgotten first).
MAX_HOSTS = 1024
#: Granularity (seconds) and reach of the per-minute counts that readiness windows are cut from.
BUCKET_S = 60.0
RETAIN_S = 7 * 24 * 3600.0
SIDES = ("host", "peer")
DIALECTS = ("standard", "legacy", "none")
#: The MCP revisions a handshake is counted under (`Recorder.handshake`'s ``era``).
ERAS = (LEGACY_ERA, MODERN_ERA)


class Series:
    """Occurrences of one thing: total, last time seen, and counts per minute for windows."""

    __slots__ = ("count", "last", "minutes")

    def __init__(self) -> None:
        self.count = 0
        self.last: float | None = None
        self.minutes: deque[list[float]] = deque()  # [minute start, n], oldest first

    def hit(self, now: float) -> None:
        self.count += 1
        self.last = now
        start = now - now % BUCKET_S
        minutes = self.minutes
        if minutes and minutes[-1][0] == start:
            minutes[-1][1] += 1
            return
        minutes.append([start, 1])
        while minutes[0][0] < now - RETAIN_S:
            minutes.popleft()

    def since(self, cutoff: float) -> int:
        """How many in the window that starts at ``cutoff`` (to the minute: a bucket counts whole
        when it ends after the cutoff)."""
        if self.last is None or self.last < cutoff:
            return 0
        total = 0
        for start, n in reversed(self.minutes):
            if start + BUCKET_S <= cutoff:
                break
            total += int(n)
        return total


class Seen:
    """One host (or peer) as its handshakes showed it, with when it last spoke each MCP revision: a
    server may answer both; a host is on the one it spoke last (`era`: one that probed
    `server/discover` and fell back to `initialize` is on 2025-11-25)."""

    __slots__ = ("name", "dialect", "eras", "handshakes", "last")

    def __init__(self, name: str | None, dialect: str) -> None:
        self.name = name
        self.dialect = dialect
        self.eras: dict[str, float] = {}
        self.handshakes = 0
        self.last = 0.0

    @property
    def era(self) -> str | None:
        return next(reversed(self.eras), None)  # ``eras`` is kept in the order last spoken

    def speaks(self, era: str, cutoff: float) -> bool:
        """Whether it spoke ``era`` since ``cutoff``."""
        return self.eras.get(era, -1.0) >= cutoff


def identity(dialect: str, name: str | None, version: Any, capabilities: Any, scope: Any) -> str:
    """What tells one host from another (docs/console.md#what-counts-as-a-host): the dialect it
    declared, its clientInfo name and version, its capabilities, and the connection, session or
    identity it speaks in when that outlives one request.  A stateless 2026-07-28 request has none,
    so every request of one client (each carries the same envelope) is the same host."""
    where = scope.base if getattr(scope, "lasting", False) else ""
    try:
        shape = "" if capabilities is None else json.dumps(capabilities, sort_keys=True, default=str)
    except (RecursionError, TypeError, ValueError):  # whatever a peer sent, the handshake is still counted
        shape = "?"
    return digest(dialect, where, name or "", clip(version, MAX_NAME) if isinstance(version, str) else "", shape)


class RouteStats:
    """What one route's handshakes and host-side input showed, for `/api/status`."""

    __slots__ = ("protocol", "dialects", "eras", "hosts", "forgotten", "legacy_input")

    def __init__(self) -> None:
        self.protocol: str | None = None
        #: handshakes by side and dialect, and (MCP) by side and era
        self.dialects = {side: {d: Series() for d in DIALECTS} for side in SIDES}
        self.eras = {side: {e: Series() for e in ERAS} for side in SIDES}
        #: per side, `identity` -> the host (or peer) it names, least recently seen first; bounded
        self.hosts: dict[str, OrderedDict[str, Seen]] = {side: OrderedDict() for side in SIDES}
        #: per side, when the most recently seen of the hosts forgotten (beyond `MAX_HOSTS`) was seen
        self.forgotten: dict[str, float | None] = {side: None for side in SIDES}
        #: reminders the host side sent in the legacy dialect (ACP `session/remind`, A2A metadata)
        self.legacy_input = Series()

    def seen(self, side: str, cutoff: float) -> list[Seen]:
        """The hosts (or peers) seen since ``cutoff``, most recent first."""
        found = []
        for host in reversed(self.hosts[side].values()):
            if host.last < cutoff:
                break
            found.append(host)
        return found

    def complete(self, side: str, cutoff: float) -> bool:
        """Whether `seen` holds them all: none seen since ``cutoff`` was forgotten."""
        forgotten = self.forgotten[side]
        return forgotten is None or forgotten < cutoff

    def traffic(self) -> bool:
        """Whether anything was seen at all: a handshake on either side, or legacy host input."""
        return self.legacy_input.count > 0 or any(s.count for side in self.dialects.values() for s in side.values())


#: A queued event: (kind, what its `data:` shows, its cost in bytes).
Event = tuple[str, dict[str, Any], int]


class Subscriber:
    """One `/api/events` watcher: a queue bounded in count and bytes, what it lost, a wake-up, and
    how to hang up on it (`hang_up`, set by whoever serves its connection)."""

    __slots__ = ("queue", "size", "max_bytes", "bytes", "lost", "reported", "sent", "wake", "loop", "thread",
                 "since", "writing", "lost_at_write", "hang_up")

    def __init__(self, size: int = QUEUE, max_bytes: int = QUEUE_BYTES) -> None:
        self.queue: deque[Event] = deque()
        self.size, self.max_bytes, self.bytes = size, max_bytes, 0
        self.lost = 0
        self.reported = 0
        self.sent = 0
        self.wake = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.since = time.time()
        #: a write to the watcher is under way, begun when it had lost `lost_at_write`
        self.writing = False
        self.lost_at_write = 0
        self.hang_up: Callable[[], None] | None = None

    def push(self, event: Event) -> bool:
        """Queue ``event``, dropping the oldest to make room.  True when the watcher stopped reading:
        a whole queue's worth was lost while one write to it waited (the caller then drops it)."""
        queue = self.queue
        cost = event[2]
        while queue and (len(queue) >= self.size or self.bytes + cost > self.max_bytes):
            self.bytes -= queue.popleft()[2]
            self.lost += 1
        if self.writing and self.lost - self.lost_at_write >= self.size:
            return True
        queue.append(event)
        self.bytes += cost
        if not self.wake.is_set():
            if threading.get_ident() == self.thread:
                self.wake.set()
            else:  # a flow driven from another thread: asyncio objects belong to their loop
                self.loop.call_soon_threadsafe(self.wake.set)
        return False

    def take(self) -> Event:
        event = self.queue.popleft()
        self.bytes -= event[2]
        return event

    async def send(self, write: Callable[[bytes], Any], data: bytes) -> None:
        """One write, marked as under way while it waits for the watcher's socket."""
        self.writing, self.lost_at_write = True, self.lost
        try:
            await write(data)
        finally:
            self.writing = False

    def close(self) -> None:
        """Hang up on the watcher (from any thread): its writer's pending write then fails."""
        if self.hang_up is not None:
            self.loop.call_soon_threadsafe(self.hang_up)


class Feed:
    """The listener the admin port attaches to every Recorder it serves (see module docstring)."""

    def __init__(self, *, show_bodies: bool = False, queue: int = QUEUE, queue_bytes: int = QUEUE_BYTES,
                 max_subscribers: int = MAX_SUBSCRIBERS, clock: Callable[[], float] = time.time):
        self.show_bodies = show_bodies
        self.queue = queue
        self.queue_bytes = queue_bytes
        self.max_subscribers = max_subscribers
        self.clock = clock
        #: when the statistics began: a readiness window that reaches back before it says "since start-up"
        self.started = clock()
        self.subscribers: list[Subscriber] = []
        self.routes: dict[str, RouteStats] = {}
        self.timeline = Timeline(clock)
        self.lost_total = 0  # by watchers that have gone (live ones count their own)
        self.dropped = 0  # watchers hung up on because they stopped reading
        self._key = secrets.token_bytes(32)  # per process: hashes can't be matched across restarts
        self._hashes: dict[str, str] = {}
        self._attached: weakref.WeakSet[Any] = weakref.WeakSet()  # never keeps a dead route's Recorder alive

    # -- attaching -----------------------------------------------------------------------------
    def attach(self, recorders: Iterable[Any]) -> None:
        for recorder in recorders:
            if self not in recorder.listeners:
                recorder.listeners.append(self)
                self._attached.add(recorder)

    def detach(self) -> None:
        for recorder in list(self._attached):
            if self in recorder.listeners:
                recorder.listeners.remove(self)
        self._attached.clear()

    def stats(self, route: str) -> RouteStats:
        found = self.routes.get(route)
        if found is None:
            found = self.routes[route] = RouteStats()
        return found

    # -- the hot path (called by Recorder) -------------------------------------------------------
    def decision(self, record: dict[str, Any]) -> None:
        self.timeline.decision(record["route"], record.get("action"))
        if record.get("source") == "legacy" and record.get("direction") == "toward_peer":
            self.stats(record["route"]).legacy_input.hit(self.clock())
        if self.subscribers:
            self._publish(self._decision_event(record))

    def handshake(self, record: dict[str, Any]) -> None:
        side, dialect = record.get("side"), record.get("dialect")
        if side not in SIDES or dialect not in DIALECTS:
            return
        now = self.clock()
        stats = self.stats(record["route"])
        stats.protocol = record.get("protocol") or stats.protocol
        stats.dialects[side][dialect].hit(now)
        client = record.get("client")
        name = clip(client, MAX_NAME) if isinstance(client, str) and client else None
        key = identity(dialect, name, record.get("version"), record.get("capabilities"), record.get("scope"))
        hosts = stats.hosts[side]
        host = hosts.get(key)
        if host is None:
            host = hosts[key] = Seen(name, dialect)
            if len(hosts) > MAX_HOSTS:
                stats.forgotten[side] = hosts.popitem(last=False)[1].last
        else:
            hosts.move_to_end(key)
        host.handshakes += 1
        host.last = now
        era = record.get("era")
        if era in ERAS:
            stats.eras[side][era].hit(now)
            host.eras.pop(era, None)
            host.eras[era] = now
        if self.subscribers:
            data = {"time": round(now, 3), "route": record.get("route"), "protocol": record.get("protocol"),
                    "side": side, "dialect": dialect, "client": name}
            self._publish(("handshake", data, EVENT_OVERHEAD + len(name or "")))

    def refusal(self, record: dict[str, Any]) -> None:
        """A reminder a budget or trust limit refused: counted into its minute (a watcher sees it as
        the decision that follows)."""
        self.timeline.refusal(record["route"], refusal_cause(record))

    def _decision_event(self, record: dict[str, Any]) -> Event:
        """The summary a watcher is sent of one decision: it keeps no reference to the reminder."""
        reminder = record.get("reminder")
        body = getattr(reminder, "body", None)
        data = {"time": round(self.clock(), 3), "route": record.get("route"), "protocol": record.get("protocol"),
                "method": clip(record.get("method"), MAX_SHOWN_ID), "session": self.session_hash(record.get("session")),
                "direction": record.get("direction"), "action": record.get("action"), "stage": record.get("stage"),
                "reminder_id": clip(getattr(reminder, "id", None), MAX_SHOWN_ID),
                "dedupe_key": clip(getattr(reminder, "dedupe_key", None), MAX_SHOWN_ID),
                "source": record.get("source"), "target": record.get("target"),
                "size": utf8_size(body) if isinstance(body, str) else None,
                "reason": clip(record.get("reason"), MAX_REASON)}
        if self.show_bodies and isinstance(body, str):
            data["body"] = clip(body, MAX_BODY)
        cost = EVENT_OVERHEAD + sum(len(v) for v in data.values() if isinstance(v, str))
        return ("decision", data, cost)

    def _publish(self, event: Event) -> None:
        stalled = [subscriber for subscriber in self.subscribers if subscriber.push(event)]
        for subscriber in stalled:
            self.unsubscribe(subscriber)
            self.dropped += 1
            subscriber.close()

    # -- watchers ------------------------------------------------------------------------------
    def subscribe(self) -> Subscriber | None:
        """A new watcher, or None when there are already `max_subscribers`."""
        if len(self.subscribers) >= self.max_subscribers:
            return None
        subscriber = Subscriber(self.queue, self.queue_bytes)
        self.subscribers = [*self.subscribers, subscriber]  # copy on write: the hot path iterates it
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers = [s for s in self.subscribers if s is not subscriber]
            self.lost_total += subscriber.lost

    def lost(self) -> int:
        """Events watchers never received, since start-up (gone watchers and live ones)."""
        return self.lost_total + sum(s.lost for s in self.subscribers)

    def summary(self) -> dict[str, Any]:
        """The feed's part of `/api/status`."""
        return {"subscribers": len(self.subscribers), "queue": self.queue, "queue_bytes": self.queue_bytes,
                "show_bodies": self.show_bodies, "lost": self.lost(), "dropped": self.dropped,
                "watchers": [{"since": round(s.since, 3), "sent": s.sent, "lost": s.lost, "waiting": len(s.queue),
                              "waiting_bytes": s.bytes} for s in self.subscribers]}

    def families(self) -> Iterable[tuple[str, str, str, list[tuple[str, dict[str, str], float]]]]:
        """The feed's metric families for `/metrics` (see `bridge.admin`)."""
        yield ("reminder_bridge_console_watchers", "gauge", "Watchers of /api/events now.",
               [("", {}, len(self.subscribers))])
        yield ("reminder_bridge_console_events_lost_total", "counter",
               "Events of /api/events a watcher never received: its bounded queue was full.",
               [("", {}, self.lost())])
        yield ("reminder_bridge_console_watchers_dropped_total", "counter",
               "Watchers of /api/events hung up on because they stopped reading (a whole queue lost during one "
               "write).", [("", {}, self.dropped)])

    def session_hash(self, session: Any) -> str | None:
        """A keyed hash of a session key: the same session reads the same within this process, and
        nobody without the per-process key can tell which session it was."""
        if session is None:
            return None
        text = str(session)
        found = self._hashes.get(text)
        if found is None:
            if len(self._hashes) >= 4096:
                self._hashes.clear()
            found = self._hashes[text] = hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()[:12]
        return found

    @staticmethod
    def encode(event: Event) -> bytes:
        """One SSE record (`event: decision` or `event: handshake`) for a queued event."""
        kind, data, _ = event
        return f"event: {kind}\ndata: ".encode() + json.dumps(data, default=str).encode() + b"\n\n"

    async def stream(self, subscriber: Subscriber, write: Callable[[bytes], Any], *, heartbeat: float = 15.0,
                     batch: int = 256) -> None:
        """Send ``subscriber``'s events through ``write`` (an awaitable writer) until it fails."""
        await subscriber.send(write, b"retry: 2000\nevent: hello\ndata: " + json.dumps(
            {"queue": self.queue, "show_bodies": self.show_bodies}).encode() + b"\n\n")
        while True:
            if not subscriber.queue and subscriber.lost == subscriber.reported:
                subscriber.wake.clear()
                try:
                    await asyncio.wait_for(subscriber.wake.wait(), heartbeat)
                except asyncio.TimeoutError:
                    await subscriber.send(write, b": keep-alive\n\n")
                    continue
            chunks: list[bytes] = []
            if subscriber.lost != subscriber.reported:
                subscriber.reported = subscriber.lost
                chunks.append(b"event: lost\ndata: " + json.dumps({"lost": subscriber.lost}).encode() + b"\n\n")
            taken = size = 0
            while subscriber.queue and taken < batch and size < BATCH_BYTES:
                chunks.append(self.encode(subscriber.take()))
                size += len(chunks[-1])
                taken += 1
            subscriber.sent += taken
            await subscriber.send(write, b"".join(chunks))


def utf8_size(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes; without encoding it when it is ASCII (most bodies)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
