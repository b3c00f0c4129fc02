"""`OutboxServe`: reminders → outbox, the serve half of the outbox add-on (docs/outbox.md).

A route with `serve_outbox` records every reminder the server pushes in its own outbox resource
(`served.ServedOutbox`), lists it in `resources/list` and answers its reads itself. A host that
listens for reminders still gets them pushed; a host that does not (dialect `none`) gets them
from the outbox instead of the tool-result fallback.

**Whose.**  The served outbox is keyed by the flow's `Scope` (its stdio connection, MCP session or
identity): no session ever reads another's.  A request that is nobody's beyond its answer (a
2026-07-28 request the rules name no identity for) has no outbox: reading it is refused with an
error saying what to configure, and nothing is recorded for it.

**Store trouble.**  A reminder the store cannot take is kept in memory (`served.Incoming`: in
order, bounded, counted) and written at the retry; the store's `health` makes /readyz say
degraded meanwhile.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from bridge.dialects.mcp import HOST_CODECS
from bridge.jsonrpc import error_response
from bridge.model import Reminder
from bridge.outbox.base import HANDSHAKES, StoreAddOn, run_quietly
from bridge.outbox.served import MODERN_RESULT, BadRead, Behind, Incoming, Item, ServedOutbox, no_owner
from bridge.outbox.store import Store
from bridge.pipeline.addons import Message
from bridge.pipeline.commands import HOST, Command, Defer

#: Reminders for the served outbox kept in memory while the store cannot take them (the oldest go beyond).
UNSAVED_KEPT = 256


class OutboxServe(StoreAddOn):
    """Per connection (stdio) or session (HTTP), on a route with `serve_outbox`."""

    def __init__(self, store: Store, served: ServedOutbox, *, route: str, identity: str | None = None,
                 wall: Callable[[], float] = time.time):
        super().__init__(store, route=route, wall=wall)
        self.served = served
        self.identity = identity
        self.incoming = Incoming(UNSAVED_KEPT)  # reminders on their way into the served outbox

    @property
    def key(self) -> str:
        return self.served.key(self.flow.scope)

    # -- host → server -----------------------------------------------------------------------
    def host_markers(self) -> tuple[bytes, ...]:
        return (b"resources",)

    def on_host(self, msg: Message) -> list[Command] | None:
        if "id" not in msg:
            return None
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if method in HANDSHAKES:
            self.flow.watch(msg, self)  # the host is told the server has resources
        elif method == "resources/read" and self.served.owns(params.get("uri")):
            if not self.owned:
                return [self.flow.reply(HOST, msg, no_owner(msg["id"], self.served.resource, self.route,
                                                            self.identity))]
            return [self._answer_read(msg, params["uri"])]
        elif method == "resources/list" and self.owned:
            self.flow.watch(msg, self)
        return None

    def _answer_read(self, msg: Message, uri: str) -> Defer:
        """The host reads the proxy's own outbox (its scope's): answered here (off the loop), never
        forwarded."""
        served, key, now_ms = self.served, self.key, self._wall_ms()

        def done(answer: Any) -> list[Command]:
            if isinstance(answer, BadRead):
                response = error_response(msg["id"], -32602, f"cannot read {uri}: {answer}")
            elif isinstance(answer, BaseException):
                self.flow.recorder.log("outbox_store_error", why=f"reading the served outbox: {answer}")
                response = error_response(msg["id"], -32603, f"cannot read {uri}: the proxy's outbox store failed")
            else:
                result: dict[str, Any] = {"contents": [{"uri": uri, "mimeType": "application/json",
                                                        "text": json.dumps(answer, ensure_ascii=False)}]}
                if self.flow.modern:
                    result.update(MODERN_RESULT)
                response = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
                for _ in answer["events"]:
                    self.flow.record("attached", "resources/read", None, source="outbox", target="host")
            return [self.flow.reply(HOST, msg, response)]

        return self._defer(lambda: served.read(key, uri, now_ms), done, replies=True)

    # -- responses toward the host -----------------------------------------------------------
    def on_response(self, request_method: str | None, response: Message) -> Message | None:
        if request_method == "resources/list":
            return self.served.listed(response, modern=self.flow.modern)
        if request_method not in HANDSHAKES:
            return None
        result = response.get("result")
        caps = result.get("capabilities") if isinstance(result, dict) else None
        if not isinstance(caps, dict):
            return None
        if not isinstance(caps.get("resources"), dict):
            caps["resources"] = {}
        return response

    # -- reminders the server pushes ---------------------------------------------------------
    def on_reminder(self, reminder: Reminder, method: str | None, source: str,
                    target: str) -> tuple[list[Command], bool]:
        """Record a server's reminder in the proxy's outbox; a host that listens gets it pushed as
        usual too, one that does not reads it from the outbox instead (kept)."""
        if not self.owned:
            return [], False
        self.flow.record("queued", method, reminder, source=source, target="outbox")
        item, now = self.incoming.arrive(reminder, self._wall_ms())
        if not now:  # earlier ones wait for the store: this one waits behind them
            self._dropped(self.incoming.keep([item]))
            return [], target not in HOST_CODECS
        return [self._capture([item], retry=False)], target not in HOST_CODECS

    def _capture(self, items: list[Item], retry: bool) -> Defer:
        """Reminders into the served outbox (`Incoming` keeps their order through store trouble)."""
        served, key, incoming = self.served, self.key, self.incoming

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

        return self._defer(lambda: incoming.write(served, key, items, retry), done)

    def _serve_kept(self) -> list[Command]:
        """What the store could not take, once its retry is due and nothing else is being written."""
        batch = self.incoming.due() if self.retry_at is None else None
        return [self._capture(batch, retry=True)] if batch else []

    def _dropped(self, reminders: list[Reminder]) -> None:
        for reminder in reminders:
            self.flow.record("dropped", None, reminder, target="outbox",
                             why=f"the outbox store fails and {UNSAVED_KEPT} reminders wait for it already")

    # -- timers ------------------------------------------------------------------------------
    def _retry(self) -> list[Command]:
        return self._serve_kept()

    def _prune(self) -> Defer:
        """Events past the retention window leave this scope's outbox."""
        served, now_ms = self.served, self._wall_ms()
        key = self.key if self.owned else None

        def work() -> None:
            if key is not None:
                served.prune(key, now_ms)

        def done(outcome: Any) -> list[Command]:
            if isinstance(outcome, BaseException):
                self.flow.recorder.log("outbox_store_error", why=f"pruning: {outcome}")
            return []

        return self._defer(work, done)

    def close(self) -> None:
        """Reminders the store has not taken yet get one last try, on the store's lane (nothing
        waits for it)."""
        self.closed = True
        waiting = self.incoming.abandon()
        if waiting:
            self.store.lane.submit(run_quietly, self.served.capture, self.key, waiting)
