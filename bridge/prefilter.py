"""The cheap, exact test "could this frame concern reminders?" (ARCHITECTURE: most traffic is
never decoded).

Exact means no false negatives: a frame is skipped only when no marker can be in it, not even
spelled with JSON escapes.  JSON lets any character of a key or method be written as `\\uXXXX`;
markers are ASCII letters, so only an escaped printable ASCII character (`\\u0020`–`\\u007f`) could
hide one, and a frame holding such an escape is always decoded.  Markers never contain `/`,
which JSON may also escape (`\\/`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

_ESCAPED_ASCII = re.compile(rb"\\u00[2-7][0-9a-fA-F]")

#: Every reminder message, field and capability of every dialect contains one of these:
#: reminder(s), session/remind, inject_reminder, reminderUpdate, InjectTaskReminder.
REMINDER_MARKERS: tuple[bytes, ...] = (b"emind",)


def could_concern(frame: bytes, markers: Iterable[bytes] = REMINDER_MARKERS) -> bool:
    for marker in markers:
        if marker in frame:
            return True
    return b"\\u00" in frame and _ESCAPED_ASCII.search(frame) is not None
