"""The era bridge's listen streams (issue 21, point 2), sans-I/O: a 2026-07-28 host's
`subscriptions/listen` requests in front of a 2025-11-25 server, whose notifications come on one
channel (stdio) with no subscription of their own.

A listen stays open as the stream: the bridge acknowledges it with the part of its filter the
server's capabilities can honour, subscribes upstream (`resources/subscribe`) to each resource URI
one stream first asks for and unsubscribes once none does, and copies each server notification
onto every open stream whose filter takes it, stamped with that stream's subscription id. Pure:
the caller turns what it returns into writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.dialects.mcp import ACK_METHOD, LOG_LEVEL_KEY, REMINDERS_FILTER, SUBSCRIPTION_KEY
from bridge.dialects.paths import get_path, params_meta

#: The filter keys for `list_changed`, the notification each selects, and the capability that must
#: say `listChanged` for it to be honoured.
LIST_CHANGED = {"notifications/tools/list_changed": ("toolsListChanged", "tools"),
                "notifications/resources/list_changed": ("resourcesListChanged", "resources"),
                "notifications/prompts/list_changed": ("promptsListChanged", "prompts")}
UPDATED = "notifications/resources/updated"


@dataclass
class Listen:
    """One open listen stream: its id as the host wrote it, what was honoured, whether it opted in
    to log messages (`_meta` logLevel) and to reminders (the filter key `reminders`)."""

    id: Any
    honoured: dict[str, Any]
    logs: bool
    reminders: bool


class Listens:
    """The open listen streams of one server connection (by id key, oldest first), and the resource
    URIs subscribed upstream with how many streams want each."""

    def __init__(self) -> None:
        self.open: dict[Any, Listen] = {}
        self.uris: dict[str, int] = {}

    def listen(self, key: Any, msg: dict[str, Any], caps: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Open the stream of listen request ``msg``: its acknowledgement, and the URIs to subscribe
        to upstream now."""
        asked = get_path(msg, "params", "notifications")
        asked = asked if isinstance(asked, dict) else {}
        honoured: dict[str, Any] = {}
        for name, cap in LIST_CHANGED.values():
            if asked.get(name) is True and get_path(caps, cap, "listChanged") is True:
                honoured[name] = True
        uris = asked.get("resourceSubscriptions")
        fresh: list[str] = []
        if isinstance(uris, list) and get_path(caps, "resources", "subscribe") is True:
            honoured["resourceSubscriptions"] = kept = list(dict.fromkeys(u for u in uris if isinstance(u, str)))
            for uri in kept:
                self.uris[uri] = self.uris.get(uri, 0) + 1
                if self.uris[uri] == 1:
                    fresh.append(uri)
        meta = params_meta(msg)
        logs = isinstance(meta, dict) and isinstance(meta.get(LOG_LEVEL_KEY), str)  # (a server without logging sends none)
        self.open[key] = Listen(msg["id"], honoured, logs, asked.get(REMINDERS_FILTER) is True)
        ack = {"jsonrpc": "2.0", "method": ACK_METHOD,
               "params": {"notifications": honoured, "_meta": {SUBSCRIPTION_KEY: msg["id"]}}}
        return ack, fresh

    def close(self, key: Any) -> list[str] | None:
        """The host cancelled stream ``key``: the URIs no stream wants any more (None: no such stream)."""
        listen = self.open.pop(key, None)
        if listen is None:
            return None
        gone = []
        for uri in listen.honoured.get("resourceSubscriptions", []):
            self.uris[uri] -= 1
            if not self.uris[uri]:
                del self.uris[uri]
                gone.append(uri)
        return gone

    def copies(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """``msg`` (a server notification) once for each open stream that takes it, stamped."""
        method = msg.get("method")
        if method in LIST_CHANGED:
            name = LIST_CHANGED[method][0]
            takes = [s for s in self.open.values() if s.honoured.get(name) is True]
        elif method == UPDATED:
            uri = get_path(msg, "params", "uri")
            takes = [s for s in self.open.values() if uri in s.honoured.get("resourceSubscriptions", ())]
        else:  # a log message
            takes = [s for s in self.open.values() if s.logs]
        return [stamped(msg, s.id) for s in takes]

    def for_reminders(self) -> Any:
        """The id of the newest stream that opted in to reminders (None: none did)."""
        ids = [s.id for s in self.open.values() if s.reminders]
        return ids[-1] if ids else None


def stamped(msg: dict[str, Any], subscription: Any) -> dict[str, Any]:
    """``msg`` with `_meta[subscriptionId]` = ``subscription``."""
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    return {**msg, "params": {**params, "_meta": {**meta, SUBSCRIPTION_KEY: subscription}}}
