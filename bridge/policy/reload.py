"""Hot reload of a rules file (SPEC §7): notice a change, validate it whole, and only then apply.

The one part of the policy package that touches the file system (a `stat` per poll, a read per
change).  Transports call `RulesFile.poll()` on a timer and `RulesFile.reload()` on SIGHUP; a
file that fails validation is refused with the very problems `reminder-bridge check` prints,
and the caller keeps the rules it has.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bridge.rules import RouteSettings, RuleProblem, Rules, RulesError, load_rules

#: How often transports look at the file, in seconds.
POLL = 0.5


@dataclass(frozen=True)
class Loaded:
    rules: Rules
    settings: RouteSettings


@dataclass(frozen=True)
class Refused:
    problems: list[RuleProblem]

    @property
    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class RulesFile:
    """One rules file and the route a transport serves from it.

    ``select(rules)`` picks that route's settings and raises KeyError (with a message) when the
    new file no longer has it.
    """

    def __init__(self, path: str | Path, select: Callable[[Rules], RouteSettings]):
        self.path = Path(path)
        self.select = select
        self._seen = self._signature()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def poll(self) -> Loaded | Refused | None:
        """Reload if the file changed since it was last looked at; None when it did not."""
        seen = self._signature()
        if seen == self._seen:
            return None
        self._seen = seen
        return self.reload()

    def reload(self) -> Loaded | Refused:
        """Read and validate the file now; `Refused` carries every problem, as `check` reports them."""
        self._seen = self._signature()
        try:
            rules = load_rules(self.path)
        except RulesError as exc:
            return Refused(exc.problems)
        try:
            settings = self.select(rules)
        except KeyError as exc:
            return Refused([RuleProblem(str(self.path), None, "routes", str(exc.args[0]))])
        return Loaded(rules, settings)
