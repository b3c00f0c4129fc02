"""The console's live feed and dialect statistics: one `Feed`, attached to Recorders as a listener.

`Recorder.reminder` and `Recorder.handshake` call `Feed.decision` / `Feed.handshake` inside the
proxy's hot path, so both are O(1), never await and encode nothing: a decision is counted into
the readiness statistics (only when it is legacy input from the host side) and, when someone
watches `/api/events`, its record is appended to each watcher's bounded queue.  Encoding (JSON,
the session hash, the body's size) happens in the watcher's own writer task, for the events it
actually sends.  A watcher whose queue is full loses the oldest events: they are counted, the
count is sent to it (`event: lost`) and shown in `/api/status`; the proxy never waits for it.
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

#: Events one watcher may have waiting before the oldest are dropped (and counted as lost).
QUEUE = 1000
#: Watchers of `/api/events` at once; more are refused (503).
MAX_SUBSCRIBERS = 32
#: Client names remembered per route and side (the least recently seen are forgotten first).
MAX_CLIENTS = 256
#: Granularity (seconds) and reach of the per-minute counts that readiness windows are cut from.
BUCKET_S = 60.0
RETAIN_S = 7 * 24 * 3600.0
SIDES = ("host", "peer")
DIALECTS = ("standard", "legacy", "none")


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


class RouteStats:
    """What one route's handshakes and host-side input showed, for `/api/status`."""

    __slots__ = ("protocol", "dialects", "clients", "legacy_input", "unnamed_legacy")

    def __init__(self) -> None:
        self.protocol: str | None = None
        self.dialects = {side: {d: Series() for d in DIALECTS} for side in SIDES}
        #: (name, dialect) -> [count, last seen], per side; bounded, least recently seen forgotten
        self.clients: dict[str, OrderedDict[tuple[str, str], list[float]]] = {side: OrderedDict() for side in SIDES}
        #: reminders the host side sent in the legacy dialect (ACP `session/remind`, A2A metadata)
        self.legacy_input = Series()
        #: legacy host handshakes that gave no client name
        self.unnamed_legacy = Series()


class Subscriber:
    """One `/api/events` watcher: a bounded queue, the count of what it lost, a wake-up."""

    __slots__ = ("queue", "lost", "reported", "sent", "wake", "loop", "thread", "since")

    def __init__(self, size: int = QUEUE) -> None:
        self.queue: deque[tuple[str, float, dict[str, Any]]] = deque(maxlen=size)
        self.lost = 0
        self.reported = 0
        self.sent = 0
        self.wake = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.since = time.time()

    def push(self, item: tuple[str, float, dict[str, Any]]) -> None:
        queue = self.queue
        if len(queue) == queue.maxlen:
            self.lost += 1  # the deque drops its oldest on append
        queue.append(item)
        if not self.wake.is_set():
            if threading.get_ident() == self.thread:
                self.wake.set()
            else:  # a flow driven from another thread: asyncio objects belong to their loop
                self.loop.call_soon_threadsafe(self.wake.set)


class Feed:
    """The listener the admin port attaches to every Recorder it serves (see module docstring)."""

    def __init__(self, *, show_bodies: bool = False, queue: int = QUEUE, max_subscribers: int = MAX_SUBSCRIBERS,
                 clock: Callable[[], float] = time.time):
        self.show_bodies = show_bodies
        self.queue = queue
        self.max_subscribers = max_subscribers
        self.clock = clock
        self.subscribers: list[Subscriber] = []
        self.routes: dict[str, RouteStats] = {}
        self.lost_total = 0  # by watchers that have gone (live ones count their own)
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
        if record.get("source") == "legacy" and record.get("direction") == "toward_peer":
            self.stats(record["route"]).legacy_input.hit(self.clock())
        if self.subscribers:
            item = ("decision", self.clock(), record)
            for subscriber in self.subscribers:
                subscriber.push(item)

    def handshake(self, record: dict[str, Any]) -> None:
        side, dialect = record.get("side"), record.get("dialect")
        if side not in SIDES or dialect not in DIALECTS:
            return
        now = self.clock()
        stats = self.stats(record["route"])
        stats.protocol = record.get("protocol") or stats.protocol
        stats.dialects[side][dialect].hit(now)
        client = record.get("client")
        if isinstance(client, str) and client:
            clients = stats.clients[side]
            key = (client[:200], dialect)
            entry = clients.get(key)
            if entry is None:
                entry = clients[key] = [0, now]
                if len(clients) > MAX_CLIENTS:
                    clients.popitem(last=False)
            else:
                clients.move_to_end(key)
            entry[0] += 1
            entry[1] = now
        elif side == "host" and dialect == "legacy":
            stats.unnamed_legacy.hit(now)
        if self.subscribers:
            item = ("handshake", now, record)
            for subscriber in self.subscribers:
                subscriber.push(item)

    # -- watchers ------------------------------------------------------------------------------
    def subscribe(self) -> Subscriber | None:
        """A new watcher, or None when there are already `max_subscribers`."""
        if len(self.subscribers) >= self.max_subscribers:
            return None
        subscriber = Subscriber(self.queue)
        self.subscribers = [*self.subscribers, subscriber]  # copy on write: the hot path iterates it
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers = [s for s in self.subscribers if s is not subscriber]
            self.lost_total += subscriber.lost

    def summary(self) -> dict[str, Any]:
        """The feed's part of `/api/status`."""
        return {"subscribers": len(self.subscribers), "queue": self.queue, "show_bodies": self.show_bodies,
                "lost": self.lost_total + sum(s.lost for s in self.subscribers),
                "watchers": [{"since": round(s.since, 3), "sent": s.sent, "lost": s.lost, "waiting": len(s.queue)}
                             for s in self.subscribers]}

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

    def encode(self, item: tuple[str, float, dict[str, Any]]) -> bytes:
        """One SSE record (`event: decision` or `event: handshake`) for a queued item."""
        kind, at, record = item
        if kind == "handshake":
            data: dict[str, Any] = {"time": round(at, 3), "route": record.get("route"),
                                    "protocol": record.get("protocol"), "side": record.get("side"),
                                    "dialect": record.get("dialect"), "client": record.get("client")}
        else:
            reminder = record.get("reminder")
            body = getattr(reminder, "body", None)
            data = {"time": round(at, 3), "route": record.get("route"), "protocol": record.get("protocol"),
                    "method": record.get("method"), "session": self.session_hash(record.get("session")),
                    "direction": record.get("direction"), "action": record.get("action"),
                    "stage": record.get("stage"), "reminder_id": getattr(reminder, "id", None),
                    "dedupe_key": getattr(reminder, "dedupe_key", None), "source": record.get("source"),
                    "target": record.get("target"),
                    "size": len(body.encode("utf-8", "surrogatepass")) if isinstance(body, str) else None,
                    "reason": record.get("reason")}
            if self.show_bodies and isinstance(body, str):
                data["body"] = body
        return f"event: {kind}\ndata: ".encode() + json.dumps(data, default=str).encode() + b"\n\n"

    async def stream(self, subscriber: Subscriber, write: Callable[[bytes], Any], *, heartbeat: float = 15.0,
                     batch: int = 256) -> None:
        """Send ``subscriber``'s events through ``write`` (an awaitable writer) until it fails."""
        await write(b"retry: 2000\nevent: hello\ndata: " + json.dumps(
            {"queue": self.queue, "show_bodies": self.show_bodies}).encode() + b"\n\n")
        while True:
            if not subscriber.queue and subscriber.lost == subscriber.reported:
                subscriber.wake.clear()
                try:
                    await asyncio.wait_for(subscriber.wake.wait(), heartbeat)
                except asyncio.TimeoutError:
                    await write(b": keep-alive\n\n")
                    continue
            chunks: list[bytes] = []
            if subscriber.lost != subscriber.reported:
                subscriber.reported = subscriber.lost
                chunks.append(b"event: lost\ndata: " + json.dumps({"lost": subscriber.lost}).encode() + b"\n\n")
            queue = subscriber.queue
            taken = 0
            while queue and taken < batch:
                chunks.append(self.encode(queue.popleft()))
                taken += 1
            subscriber.sent += taken
            await write(b"".join(chunks))
