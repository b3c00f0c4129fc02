"""Trust limits on untrusted reminder content (spec §2, §7, §12).  Pure.

`screen` cleans what can be cleaned (control characters, a `roleHint` above the peer's ceiling)
and refuses what cannot (a body, tags, id or dedupe key over their limits, a reminder too large
as a whole, a session holding too many reminders).  Every refusal names the field, the limit and
its configured value, so the error a user sees says what to change.  The policy screens before it
touches any state (budgets, queues), so nothing over a limit ever reaches Redis or memory.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridge.fields import CAMEL, ROLE_HINT_RANK, json_bytes
from bridge.lazy import lazily

if TYPE_CHECKING:
    from bridge import model
    from bridge.model import Reminder
    from bridge.rules import Trust
else:  # pydantic: loaded by the first reminder a route decodes (issue 23)
    model = lazily("bridge.model")

#: C0 (U+0000-U+001F) and C1 (U+0080-U+009F) control characters, except \t and \n.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x80-\x9f]")


@dataclass(frozen=True)
class TrustRefusal:
    """A reminder the route's trust limits refuse."""

    limit: str  # the rules key, e.g. "max_body_bytes"
    value: Any  # its configured value
    message: str  # what the user sees, naming both

    def data(self) -> dict[str, Any]:
        return {"limit": self.limit, "value": self.value}


def screen(reminder: Reminder, trust: Trust, *, from_peer: bool) -> tuple[Reminder, dict[str, Any]] | TrustRefusal:
    """Clean ``reminder`` and check its size; the `roleHint` ceiling applies to the peer's reminders.
    Passed: the reminder (cleaned: a copy) and what was changed, for the span and the log
    (``{"stripped": n, "roleHint": "system→developer"}``), as a plain pair (one per reminder)."""
    changes: dict[str, Any] = {}
    update: dict[str, Any] = {}
    body, tags = reminder.body, reminder.tags
    if trust.strip_control:
        stripped = 0
        if not body.isprintable() and CONTROL.search(body):  # every control character is unprintable
            body, n = CONTROL.subn("", body)
            stripped += n
            if not body.strip():
                return TrustRefusal("strip_control", True, "reminder refused: `body` is empty once control "
                                    "characters are stripped (strip_control = true)")
            update["body"] = body
        joined = "".join(tags)  # one character class: found in one tag, or none
        if tags and not joined.isprintable() and CONTROL.search(joined):
            cleaned = []
            for tag in tags:
                tag, n = CONTROL.subn("", tag)
                stripped += n
                tag = tag.strip()
                if tag and tag not in cleaned:
                    cleaned.append(tag)
            tags = update["tags"] = cleaned
        if stripped:
            changes["stripped"] = stripped
    size = len(body) if body.isascii() else len(body.encode("utf-8"))  # isascii: a flag, not a scan
    if size > trust.max_body_bytes:
        return TrustRefusal("max_body_bytes", trust.max_body_bytes,
                            f"reminder refused: `body` is {size} bytes, over max_body_bytes = {trust.max_body_bytes}")
    if len(tags) > trust.max_tags:
        return TrustRefusal("max_tags", trust.max_tags,
                            f"reminder refused: {len(tags)} tags, over max_tags = {trust.max_tags}")
    if tags and max(map(len, tags)) > trust.max_tag_chars:
        for i, tag in enumerate(tags):
            if len(tag) > trust.max_tag_chars:  # named by position: the message is logged, tag text is content
                return TrustRefusal("max_tag_chars", trust.max_tag_chars,
                                    f"reminder refused: `tags[{i}]` is {len(tag)} characters, over "
                                    f"max_tag_chars = {trust.max_tag_chars}")
    rid, key = reminder.id, reminder.dedupe_key  # at most 4 bytes a character (a lone surrogate takes 3)
    if len(rid) * 4 > trust.max_id_bytes and (refused := _over("id", rid, "max_id_bytes", trust.max_id_bytes)):
        return refused
    if key is not None and len(key) * 4 > trust.max_dedupe_key_bytes and \
            (refused := _over("dedupeKey", key, "max_dedupe_key_bytes", trust.max_dedupe_key_bytes)):
        return refused
    ceiling = trust.role_hint_ceiling
    if from_peer and ceiling is not None and ROLE_HINT_RANK[reminder.role_hint] > ROLE_HINT_RANK[ceiling]:
        changes["roleHint"] = f"{reminder.role_hint} lowered to role_hint_ceiling = {ceiling}"
        update["role_hint"] = ceiling
        if "roleHint" in reminder.originals:  # the lowered value must not be restored downstream
            update["originals"] = {k: v for k, v in reminder.originals.items() if k != "roleHint"}
    if update:
        reminder = reminder.model_copy(update=update)
        reminder.model_fields_set.update(k for k in update if k != "originals")
    limit = trust.max_reminder_bytes
    if model.size_at_most(reminder) > limit and (size := model.encoded_size(reminder)) > limit:
        name, largest = _largest_field(reminder)
        return TrustRefusal("max_reminder_bytes", limit, f"reminder refused: it is {size} bytes as a whole, over "
                            f"max_reminder_bytes = {limit} (the largest field is `{name}`, {largest} bytes)")
    return reminder, changes


def _over(name: str, value: str, key: str, limit: int) -> TrustRefusal | None:
    """The refusal of an id or a dedupe key longer than ``limit`` bytes (``key``: the rules key)."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return TrustRefusal(key, limit, f"reminder refused: `{name}` is {size} bytes, over {key} = {limit}")


def _largest_field(reminder: Reminder) -> tuple[str, int]:
    """The wire name and encoded size of the field that weighs most: `_meta` (with the proxy's own
    originals), an unknown field by its own name (the sender's: escaped and shortened), or a known one."""
    sizes = {CAMEL[attr]: json_bytes(value) for attr, value in reminder.__dict__.items() if attr in CAMEL}
    sizes["_meta"] = json_bytes(reminder.meta) + json_bytes(reminder.originals)
    for key, value in reminder.extra.items():
        shown = json.dumps(key[:40], ensure_ascii=False)[1:-1]
        sizes[shown if len(key) <= 40 else shown + "..."] = json_bytes(key) + json_bytes(value)
    name = max(sizes, key=sizes.__getitem__)
    return name, sizes[name]


def pending_refusal(trust: Trust, pending: int) -> TrustRefusal | None:
    """A session already holding ``pending`` reminders may take one more only under the limit."""
    if pending < trust.max_pending_per_session:
        return None
    return TrustRefusal("max_pending_per_session", trust.max_pending_per_session,
                        f"reminder refused: the session already holds {pending} pending reminders "
                        f"(max_pending_per_session = {trust.max_pending_per_session})")
