"""Poll answers and `EventOccurrence`s in, reminders out; and reminders back into events.

The bytes come from a server's outbox, so nothing about their declared shape is a guarantee.
Two outcomes, deliberately different (landscape.md §3.3-§3.4):

- a malformed **answer** (not an object, `events` not an array, a bad `cursor`…) fails the
  poll: there is no position in it worth advancing to, so the cursor stays put;
- a malformed **event** costs that event alone, never the batch.

Reminders made here are standard reminders: body from the notification's title and body
(plain text, control characters stripped, title ≤ 200 and body ≤ 2,000 characters), tags from
the event name and level, `dedupeKey` from name and subject, and the event itself, `data`
included, kept verbatim under `_meta["reminder-bridge/event"]`.
"""
from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from bridge.model import Reminder

NOTIFICATION_KEY = "ai.nimblebrain/notification"
EVENT_META_KEY = "reminder-bridge/event"
LEVELS = ("info", "attention", "urgent")
TITLE_MAX = 200
BODY_MAX = 2000
SUBJECT_MAX = 200
ID_MAX = 200
NAME_MAX = 200
CURSOR_MAX = 1024
LINK_MAX = 2048
EVENTS_MAX = 5000
EVENT_MAX_BYTES = 64 * 1024
TAG_MAX = 64
#: Link schemes a renderer could be talked into executing or reading local state from.
FORBIDDEN_LINK_SCHEMES = frozenset({"javascript", "data", "vbscript", "file", "blob"})
#: The namespace of reminder ids made from events: one event, one id, however often it is read.
ID_NAMESPACE = uuid.UUID("5b1d4c0e-6f0a-4a57-9a53-7265646d696e")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE = re.compile(r"\s+")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


class Malformed(ValueError):
    """What is wrong with an answer or an event, in words a server author can act on."""


@dataclass(frozen=True)
class PollAnswer:
    events: list[Any]
    cursor: str | None
    truncated: bool
    has_more: bool
    next_poll_ms: float | None


@dataclass(frozen=True)
class Event:
    """One well-formed `EventOccurrence`, its presentation block resolved."""

    raw: dict[str, Any]
    event_id: str
    name: str
    level: str
    title: str
    body: str
    subject: str
    cursor: str | None


# -- text ----------------------------------------------------------------------------------------
def plain(text: str, limit: int) -> str:
    """Plain text: control characters (C0, DEL, C1) become spaces, runs of space collapse, and a
    text over ``limit`` characters is cut with an ellipsis."""
    clean = _SPACE.sub(" ", _CONTROL.sub(" ", text)).strip()
    if len(clean) <= limit:
        return clean
    return clean[:limit - 1].rstrip() + "…"


def _clean_id(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and not _CONTROL.search(value)


# -- poll answers --------------------------------------------------------------------------------
def answer_from_read(result: Any) -> PollAnswer:
    """The poll answer carried by a `resources/read` result: the first text content, as JSON."""
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        raise Malformed("the resources/read result has no contents array")
    text = next((c.get("text") for c in contents if isinstance(c, dict) and isinstance(c.get("text"), str)), None)
    if text is None:
        raise Malformed("the resources/read result has no text content")
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise Malformed("the outbox resource's text is not JSON") from None
    return parse_answer(body)


def parse_answer(body: Any) -> PollAnswer:
    """`{events, cursor?, truncated?, hasMore?, nextPollMs?}` (also an `events/poll` result)."""
    if not isinstance(body, dict):
        raise Malformed("the poll answer is not an object")
    if body.get("resultType", "complete") != "complete":
        raise Malformed(f"the poll answer has resultType {str(body.get('resultType'))[:40]!r}, not \"complete\"")
    events = body.get("events")
    if not isinstance(events, list):
        raise Malformed("`events` is not an array")
    if len(events) > EVENTS_MAX:
        raise Malformed(f"`events` has {len(events)} entries, over the cap of {EVENTS_MAX}")
    cursor = body.get("cursor")
    if cursor is not None and not (isinstance(cursor, str) and 0 < len(cursor) <= CURSOR_MAX):
        raise Malformed(f"`cursor` is not a string of 1 to {CURSOR_MAX} characters")
    flags = {}
    for key in ("truncated", "hasMore"):
        value = body.get(key)
        if value is not None and not isinstance(value, bool):
            raise Malformed(f"`{key}` is not a boolean")
        flags[key] = bool(value)
    wait = body.get("nextPollMs")
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float))
                             or not math.isfinite(wait) or wait <= 0):
        raise Malformed("`nextPollMs` is not a positive number")
    return PollAnswer(events, cursor, flags["truncated"], flags["hasMore"], wait)


# -- events --------------------------------------------------------------------------------------
def parse_event(raw: Any) -> Event:
    """One `EventOccurrence`, or Malformed naming the field that fails."""
    if not isinstance(raw, dict):
        raise Malformed("the event is not an object")
    event_id = raw.get("eventId")
    if not _clean_id(event_id, ID_MAX):
        raise Malformed(f"`eventId` is not a string of 1 to {ID_MAX} characters without control characters")
    name = raw.get("name")
    if not _clean_id(name, NAME_MAX) or any(c.isspace() for c in name):
        raise Malformed(f"`name` is not a string of 1 to {NAME_MAX} characters without whitespace")
    if not _is_instant(raw.get("timestamp")):
        raise Malformed("`timestamp` is not an ISO 8601 instant")
    if not isinstance(raw.get("data"), dict):
        raise Malformed("`data` is not an object")
    cursor = raw.get("cursor")
    if cursor is not None and not _clean_id(cursor, CURSOR_MAX):
        raise Malformed(f"`cursor` is not a string of 1 to {CURSOR_MAX} characters")
    meta = raw.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        raise Malformed("`_meta` is not an object")
    shown = (meta or {}).get(NOTIFICATION_KEY)
    if shown is None:
        shown = {}
    if not isinstance(shown, dict):
        raise Malformed(f"`_meta[\"{NOTIFICATION_KEY}\"]` is not an object")
    level = shown.get("level", "info")
    if level not in LEVELS:
        raise Malformed(f"`level` is not one of {', '.join(LEVELS)}")
    texts = {}
    for key, limit in (("title", TITLE_MAX), ("body", BODY_MAX), ("subject", SUBJECT_MAX)):
        value = shown.get(key)
        if value is not None and not isinstance(value, str):
            raise Malformed(f"`{key}` is not a string")
        texts[key] = plain(value or "", limit)
    link = shown.get("link")
    if link is not None:
        target = link.get("resource") if isinstance(link, dict) else None
        if not isinstance(link, dict) or (target is not None and not _acceptable_link(target)):
            raise Malformed("`link.resource` is not a URI with an acceptable scheme "
                            f"(never {', '.join(sorted(FORBIDDEN_LINK_SCHEMES))})")
    size = len(json.dumps(raw, ensure_ascii=False).encode())
    if size > EVENT_MAX_BYTES:
        raise Malformed(f"the event is {size} bytes, over the cap of {EVENT_MAX_BYTES}")
    return Event(raw, event_id, name, level, texts["title"] or plain(name, TITLE_MAX), texts["body"],
                 texts["subject"], cursor)


def _is_instant(value: Any) -> bool:
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return True


def _acceptable_link(value: Any) -> bool:
    if not _clean_id(value, LINK_MAX):
        return False
    match = _SCHEME.match(value)
    return match is not None and match.group(1).lower() not in FORBIDDEN_LINK_SCHEMES


def reminder_id(source: str, event_id: str) -> str:
    """The same event always becomes the same reminder id, so a host can dedupe it too."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{source}\x00{event_id}"))


def to_reminder(source: str, event: Event) -> Reminder:
    """The standard reminder for one event (see the module docstring for the mapping)."""
    body = event.title if not event.body else f"{event.title}\n{event.body}"
    values: dict[str, Any] = {
        "id": reminder_id(source, event.event_id),
        "body": body,
        "tags": [event.name[:TAG_MAX], f"level:{event.level}"],
        # events are untrusted, like tool results: never a system-role claim
        "role_hint": "user_block",
        "source": "bridge",
        "meta": {EVENT_META_KEY: {"source": source, "event": event.raw}},
    }
    if event.subject:
        values["dedupe_key"] = f"{event.name}:{event.subject}"
    return Reminder(**values)


def gap_reminder(source: str, gap_id: str, cursor: str | None, where: str) -> Reminder:
    """The one reminder a `truncated` answer produces: events were missed and cannot be recovered.
    ``where`` names the outbox for people (its URI, or the server's events)."""
    return Reminder(
        id=reminder_id(source, gap_id),
        body=(f"Some events from {plain(where, TITLE_MAX)} were missed: the server dropped them before they "
              "could be read. Re-check the current state instead of relying on past events."),
        tags=["outbox.truncated", "level:attention"],
        dedupe_key=f"outbox.truncated:{source}",
        role_hint="user_block",
        source="bridge",
        meta={EVENT_META_KEY: {"source": source, "truncated": True, "cursor": cursor}},
    )


# -- reminders → events (the proxy's own outbox) --------------------------------------------------
def iso_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def to_event(reminder: Reminder, spec: dict[str, Any], epoch_ms: int) -> dict[str, Any]:
    """An `EventOccurrence` for one reminder: `data.reminder` is the standard ReminderSpec (lossless:
    what it cannot carry rides in its `_meta`), the notification block is what a host renders."""
    first_line = reminder.body.strip().split("\n", 1)[0]
    title = plain(first_line, TITLE_MAX) or "Reminder"
    shown: dict[str, Any] = {"level": "attention" if reminder.mode == "interrupt_immediate" else "info", "title": title}
    body = plain(reminder.body, BODY_MAX)
    if body != title:
        shown["body"] = body
    if reminder.dedupe_key:
        shown["subject"] = plain(reminder.dedupe_key, SUBJECT_MAX)
    return {"eventId": reminder.id, "name": "reminder", "timestamp": iso_ms(epoch_ms),
            "data": {"reminder": spec}, "_meta": {NOTIFICATION_KEY: shown}}
