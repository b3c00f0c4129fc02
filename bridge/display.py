"""Text that is safe to show a human (spec §13): the one place that decides how peer text looks on
an operator's terminal or page.

Peers choose clientInfo names, reminder ids and dedupe keys.  Printed raw, an ESC or BEL sequence
sets a terminal's title, clears its screen or paints a fake verdict over the real one, and a bidi
override reorders a line.  Every human-readable output (`reminder-bridge status`, the log lines,
the console page, whose script applies the same rule) writes those characters visibly instead, as
`\\x1b` or `\\u202e`, and shortens what a peer could make arbitrarily long.
"""
from __future__ import annotations

import json
import re
from typing import Any

#: What a terminal acts on or a reader cannot see: C0, DEL, C1, the line and paragraph separators,
#: and the bidi controls (Trojan Source).  console.js holds the same class (`UNSAFE`).
_BEYOND_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
UNSAFE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
#: What `json` leaves raw in its strings (it escapes C0 itself, and C0 outside strings is layout).
_RAW_IN_JSON = re.compile(f"[{_BEYOND_C0}]")
#: What `safe_text` keeps of one value unless told otherwise (characters, after escaping).
SHOWN_CHARS = 200
#: What a log line or a console event keeps of a peer's reminder id or dedupe key (characters).
MAX_SHOWN_ID = 200
ELLIPSIS = "…"


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: `UNSAFE` as a split pattern: plain text and unsafe characters alternate in what it returns.
_PARTS = re.compile(f"({UNSAFE.pattern})")


def safe_text(value: Any, limit: int | None = SHOWN_CHARS) -> str:
    """``value`` as text for a human: unsafe characters escaped visibly (`\\x1b`), then cut to
    ``limit`` characters (None: whole) with a trailing `…`.  An escape is never cut in half."""
    text = str(value)
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]  # every character shows as at least one: nothing past here can fit
    if UNSAFE.search(text):
        shown, used = [], 0
        for i, part in enumerate(_PARTS.split(text)):
            part = _escape(part) if i % 2 else part  # odd parts are the unsafe characters
            if limit is not None and used + len(part) > limit:
                shown.append("" if i % 2 else part[: limit - used])
                cut = True
                break
            shown.append(part)
            used += len(part)
        text = "".join(shown)
    return text + ELLIPSIS if cut else text


def clip(value: str | None, limit: int) -> str | None:
    """``value`` cut to ``limit`` characters (with `…`): what a record may keep of peer text.  A cut
    string is a new, small one, so the peer's original can be freed."""
    if value is None or len(value) <= limit:
        return value
    return value[:limit] + ELLIPSIS


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def safe_json(value: Any, indent: int | None = None) -> str:
    """JSON (a log line, `status --json`) that a terminal shows as it reads: `json` escapes C0 itself,
    and the rest of `UNSAFE` (DEL, C1, bidi controls) is written as `\\u` escapes, so a reader still
    parses the same values."""
    return _RAW_IN_JSON.sub(_json_escape, json.dumps(value, ensure_ascii=False, default=str, indent=indent))
