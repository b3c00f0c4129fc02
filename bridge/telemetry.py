"""What the proxy did and why: counters per action, and one structured log line per decision.

Bodies are never logged (SPEC §9); ids, methods and dialects are.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any, TextIO

from bridge.model import Reminder

#: The actions a reminder can meet (SPEC §9 `reminder.action`).
ACTIONS = ("rewritten", "passed", "queued", "attached", "rendered", "dropped", "invalid", "limited", "coalesced",
           "synthesized", "refused")


class Recorder:
    """Counts reminder decisions by (protocol, route, action) and logs the notable ones."""

    def __init__(self, route: str = "default", log: TextIO | None = None, log_level: str = "warning"):
        self.route = route
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self._log = log if log is not None else sys.stderr
        self._verbose = log_level in ("info", "debug")

    def reminder(self, action: str, *, protocol: str, method: str | None, reminder: Reminder | None = None,
                 source: str | None = None, target: str | None = None, why: str | None = None) -> None:
        self.counts[(protocol, self.route, action)] += 1
        if why is not None or self._verbose:
            self.log(action, protocol=protocol, method=method, id=reminder.id if reminder else None,
                     dedupe_key=reminder.dedupe_key if reminder else None, source=source, target=target, why=why)

    def info(self, event: str, **fields: Any) -> None:
        """Routine events (process started, admin listening): logged only at --log-level info."""
        if self._verbose:
            self.log(event, **fields)

    def log(self, event: str, **fields: Any) -> None:
        record = {"event": event, "route": self.route, **{k: v for k, v in fields.items() if v is not None}}
        self._log.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._log.flush()

    def count(self, action: str, protocol: str | None = None) -> int:
        return sum(n for (p, _, a), n in self.counts.items() if a == action and protocol in (None, p))
