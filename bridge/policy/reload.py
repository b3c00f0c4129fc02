"""Hot reload of a rules file (spec §7): notice a change, validate it whole, and only then apply.

The one part of the policy package that touches the file system (a `stat` per poll, a read per
change).  The commands call `RulesFile.poll()` on a timer and `RulesFile.reload()` on SIGHUP; a
file that fails validation is refused with the very problems `reminder-bridge check` prints,
and the caller keeps the rules it has.  `apply_reload` is the one place a result is applied to
the running routes, reported in the log and counted, for `stdio` and `serve` alike.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from typing import Any, Protocol

from bridge.policy import Policy
from bridge.rules import RouteSettings, RuleProblem, Rules, RulesError, load_rules

#: How often transports look at the file, in seconds.
POLL = 0.5


@dataclass(frozen=True)
class Loaded:
    rules: Rules
    #: the running routes' new settings, by name (a running route the file no longer has is absent)
    routes: dict[str, RouteSettings]


@dataclass(frozen=True)
class Refused:
    problems: list[RuleProblem]

    @property
    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class RulesFile:
    """One rules file and the routes a proxy serves from it.

    ``select(rules)`` gives the running routes' settings in the new file, by name.
    """

    def __init__(self, path: str | Path, select: Callable[[Rules], dict[str, RouteSettings]]):
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
        return Loaded(rules, self.select(rules))


class Reloadable(Protocol):
    """A running route as a reload sees it."""

    name: str
    recorder: Any
    policy: Any
    settings: RouteSettings

    def refusal(self, settings: RouteSettings, after: dict[str, RouteSettings]) -> tuple[str, str] | None:
        """(the setting, why) when this route cannot take ``settings`` while it runs; ``after``: every
        running route's settings once the reload is applied. None when it can."""
        ...

    def apply(self, settings: RouteSettings, policy: Any) -> dict[str, dict[str, str]]:
        """Take ``settings`` for the messages to come; returns what moved live ({setting: {from, to}})."""
        ...


def _protocol_refusal(old: RouteSettings, new: RouteSettings) -> tuple[str, str] | None:
    """No route changes its protocol live, whatever the transport: its pipelines, sessions and the
    peer it talks to are built for one."""
    if old.protocol is None or new.protocol in (None, old.protocol):
        return None
    return "protocol", (f"the route speaks {old.protocol} (its pipelines and its peer are built for it); "
                        f"serving {new.protocol} needs a restart")


def _refused(routes: list[Reloadable], field: str) -> None:
    for route in routes:
        route.recorder.reloaded("refused", field)


def apply_reload(result: Loaded | Refused, routes: list[Reloadable], trigger: str, file: str) -> bool:
    """New rules for the messages to come, route by route: a route the file still has takes them
    (its connections, learned dialects, held reminders and budget tokens stay); one it no longer
    has keeps its rules. A file with problems, or one that changes what a running route cannot
    change live (`Reloadable.refusal`), changes nothing. The log says which and why, and
    `reminder_bridge_rules_reloads_total{route,result,field}` counts it with the setting that decided."""
    log = routes[0].recorder
    if isinstance(result, Refused):
        _refused(routes, "problems")
        log.log("reload_refused", level="error", file=file, trigger=trigger, field="problems", problems=result.lines,
                why="the rules file has problems; keeping the previous rules")
        return False
    present = [r for r in routes if r.name in result.routes]
    missing = [r.name for r in routes if r.name not in result.routes]
    new = sorted(set(result.rules.routes) - {r.name for r in routes}) or None
    if not present:
        _refused(routes, "routes")
        log.log("reload_refused", level="error", file=file, trigger=trigger, field="routes", missing=missing,
                new_routes=new, why=f"none of the running routes ({', '.join(missing)}) is in the file; keeping the "
                                    f"previous rules (adding or removing routes needs a restart)")
        return False
    after = {r.name: result.routes.get(r.name, r.settings) for r in routes}
    for route in present:
        settings = result.routes[route.name]
        refusal = _protocol_refusal(route.settings, settings) or route.refusal(settings, after)
        if refusal is not None:
            field, why = refusal
            _refused(routes, field)
            log.log("reload_refused", level="error", file=file, trigger=trigger, route=route.name, field=field,
                    why=f"{why}; keeping the previous rules")
            return False
    moved: dict[str, dict[str, dict[str, str]]] = {}
    for route in present:
        settings = result.routes[route.name]
        changes = route.apply(settings, Policy(settings, result.rules.global_budget, route=route.name,
                                               state=route.policy.state,
                                               shared=route.policy.shared))  # [state] itself changes at a restart
        if changes:
            moved[route.name] = changes
        route.recorder.reloaded("ok", "+".join(sorted(changes)))
        route.recorder.tracing.capture_bodies = result.rules.telemetry.capture_bodies  # exporter, sampling: at restart
    for route in routes:
        if route.name in missing:
            route.recorder.reloaded("refused", "routes")
    why = "; ".join(part for part in (
        "routes missing from the file keep their rules" if missing else "",
        "new routes need a restart" if new else "",
        "requests in flight and open streams finish where they started; every new request, an existing "
        "session's too, goes to the new upstream and path" if moved else "") if part) or None
    log.log("rules_reloaded", level="warning" if why else "info", file=file, trigger=trigger,
            applied=[r.name for r in present], kept=missing or None, new_routes=new, moved=moved or None,
            stage=result.routes[present[0].name].stage if len(routes) == 1 else None, why=why)
    return True
