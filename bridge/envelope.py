"""The rendering envelope for sides with no reminder support (spec §6)."""
from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import TYPE_CHECKING

from bridge.defaults import DEFAULT_ENVELOPE

if TYPE_CHECKING:
    from bridge.model import Reminder


def render(reminders: Iterable[Reminder], template: str = DEFAULT_ENVELOPE) -> str:
    """One text block: each reminder in the template, joined by newlines in arrival order.

    Bodies are untrusted: `<`, `>` and `&` are escaped so a body cannot close the envelope.
    """
    lines = []
    for r in reminders:
        lines.append(template.format(
            id=escape(r.id), source=escape(r.source or "host"), body=escape(r.body, quote=False),
            tags=escape(",".join(r.tags)), dedupe_key=escape(r.dedupe_key or ""),
        ))
    return "\n".join(lines)
