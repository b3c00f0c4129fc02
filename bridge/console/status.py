"""`/api/status`: per route, what the proxy is and does, and whether it may move to `enforce`.

The migration-readiness rule (docs/console.md#readiness): a route is **ready for enforce** when,
in the window (default 24 h), no host announced the legacy dialect in its handshake and no
reminder reached the proxy from the host side in the legacy dialect (ACP `session/remind`, A2A
`metadata.harn`).  The verdict names the legacy hosts (their clientInfo names) when it is "no",
and the evidence when it is "yes" (how many hosts, in which dialects), saying so when nothing
was seen at all in the window.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from bridge.console.feed import DIALECTS, SIDES, Feed, RouteStats
from bridge.display import safe_text
from bridge.telemetry import ACTIONS

#: The readiness window unless `[admin] readiness_window_h` or `?window=` says otherwise.
DEFAULT_WINDOW_S = 24 * 3600.0
#: The actions every route lists (zero when nothing happened), in the order the console shows them.
SHOWN_ACTIONS = ("rewritten", "passed", "queued", "coalesced", "dropped", "rate_limited", "refused", "invalid",
                 "rendered", "attached", "synthesized")


def span_text(seconds: float) -> str:
    """86400 -> "24 h", 1800 -> "30 min", 90 -> "90 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def parse_window(text: str) -> float:
    """"24h", "90m", "30s", "7d", "3600" (seconds) -> seconds; ValueError (saying so) otherwise."""
    given = text.strip().lower()
    scale = {"min": 60.0, "h": 3600.0, "m": 60.0, "s": 1.0, "d": 86400.0}
    number, unit = given, 1.0
    for suffix, seconds in scale.items():
        if given.endswith(suffix):
            number, unit = given[: -len(suffix)], seconds
            break
    try:
        value = float(number) * unit
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ValueError(f"the readiness window must be a positive duration such as 24h, 90m or 3600 (got {text!r})")
    return value


def _source(recorder: Any) -> dict[str, Any]:
    """What the route's owner says of it (`Recorder.status_source`), else what its flows show."""
    source = recorder.status_source
    if callable(source):
        try:
            found = source()
            if isinstance(found, dict):
                return found
        except Exception:  # a status page must not fail because one route could not describe itself
            pass
    flows = [f for f in recorder.flows() if hasattr(f, "stage")]
    if flows:
        flow = flows[0]
        return {"transport": None, "protocol": getattr(flow, "protocol", None), "stage": flow.stage,
                "policy": getattr(flow, "policy", None), "sessions": len(flows)}
    return {}


def readiness(stats: RouteStats | None, *, protocol: str | None, stage: str | None, now: float,
              window_s: float) -> dict[str, Any]:
    """The verdict for one route (see the module docstring for the rule)."""
    cutoff = now - window_s
    span = span_text(window_s)
    stats = stats or RouteStats()
    host = {d: stats.dialects["host"][d].since(cutoff) for d in DIALECTS}
    handshakes = sum(host.values())
    names = sorted({name for (name, dialect), (_, last) in stats.clients["host"].items()
                    if dialect == "legacy" and last >= cutoff})
    inputs = stats.legacy_input.since(cutoff)
    seen = handshakes > 0 or inputs > 0
    reasons: list[str] = []
    unnamed = stats.unnamed_legacy.since(cutoff)
    if names:
        n = len(names)
        shown = ", ".join(names[:10]) + (f", … {n - 10} more" if n > 10 else "")
        more = f" and {unnamed} unnamed" if unnamed else ""
        reasons.append(f"{n} legacy host{'s' if n != 1 else ''}{more} seen in the last {span} ({shown})")
    elif unnamed or host["legacy"]:
        n = unnamed or host["legacy"]
        reasons.append(f"{n} legacy host handshake{'s' if n != 1 else ''} in the last {span} (no clientInfo name)")
    if inputs:
        reasons.append(f"{inputs} legacy reminder{'s' if inputs != 1 else ''} from the host side in the last {span}")
    if reasons:
        verdict, ready = "no", False
        evidence = "; ".join(reasons)
    elif seen:
        verdict, ready = "yes", True
        mix = ", ".join(f"{host[d]} {d}" for d in ("standard", "none") if host[d])
        evidence = (f"no legacy host in the last {span}: {handshakes} host handshake{'s' if handshakes != 1 else ''}"
                    f" ({mix}), no legacy reminder from the host side")
    else:
        verdict, ready = "yes", True
        evidence = f"nothing seen in the last {span}: no host handshake and no reminder from the host side"
    note = None
    if stage == "enforce":
        note = "the route is already at enforce: legacy reminders from the host side are refused"
    elif protocol == "mcp":
        note = "MCP reminders only flow toward the host, so for MCP enforce acts like translate"
    return {"ready": ready, "verdict": verdict, "seen": seen, "text": f"ready for enforce: {verdict} — {evidence}",
            "evidence": evidence, "window_s": window_s, "legacy_hosts": names, "host_handshakes": host,
            "legacy_inputs": inputs, "note": note}


def _series(stats: RouteStats, side: str, cutoff: float) -> dict[str, Any]:
    return {d: {"count": s.count, "in_window": s.since(cutoff), "last_seen": None if s.last is None else round(s.last, 3)}
            for d, s in stats.dialects[side].items()}


def _clients(stats: RouteStats, side: str, limit: int = 50) -> list[dict[str, Any]]:
    rows = sorted(stats.clients[side].items(), key=lambda item: -item[1][1])[:limit]
    return [{"name": name, "dialect": dialect, "count": int(count), "last_seen": round(last, 3)}
            for (name, dialect), (count, last) in rows]


def route_status(recorder: Any, feed: Feed | None, *, now: float, window_s: float) -> dict[str, Any]:
    source = _source(recorder)
    stats = feed.routes.get(recorder.route) if feed is not None else None
    actions: Counter[str] = Counter()
    protocols: list[str] = []
    for (protocol, _, action), n in list(recorder.counts.items()):
        actions[action] += n
        if protocol not in protocols:
            protocols.append(protocol)
    protocol = source.get("protocol") or (stats.protocol if stats else None) or (protocols[0] if protocols else None)
    stage = source.get("stage")
    if stage is None:
        stages = [s for (_, _, _, s) in list(recorder.staged)]
        stage = stages[-1] if stages else None
    policy = source.get("policy")
    budgets: list[dict[str, Any]] = []
    if policy is not None and hasattr(policy, "gauges"):
        budgets = policy.gauges(time.monotonic())
    pending: Counter[str] = Counter()
    for (_, _, queue), n in recorder.pending().items():
        if n:
            pending[queue] += n
    cutoff = now - window_s
    stats_or_empty = stats or RouteStats()
    return {
        "name": recorder.route,
        "transport": source.get("transport"),
        "protocol": protocol,
        "stage": stage,
        "sessions": source.get("sessions"),
        "dialects": {side: _series(stats_or_empty, side, cutoff) for side in SIDES},
        "clients": {side: _clients(stats_or_empty, side) for side in SIDES},
        "actions": {**{a: actions.get(a, 0) for a in SHOWN_ACTIONS},
                    **{a: n for a, n in sorted(actions.items()) if a not in SHOWN_ACTIONS}},
        "budget_rejections": sum(recorder.budget_rejections.values()),
        "trust_refusals": sum(recorder.trust_refusals.values()),
        "budgets": budgets,
        "pending": dict(sorted(pending.items())),
        "pending_total": sum(pending.values()),
        "readiness": readiness(stats, protocol=protocol, stage=stage, now=now, window_s=window_s),
    }


async def refresh_shared_levels(recorders: Iterable[Any]) -> None:
    """Budget gauges on shared state are read from Redis, once per page load, before drawing."""
    for recorder in recorders:
        policy = _source(recorder).get("policy")
        if policy is not None and getattr(policy, "shared", None) is not None:
            await policy.refresh_levels()


def build_status(recorders: Iterable[Any], feed: Feed | None, *, window_s: float = DEFAULT_WINDOW_S,
                 now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    routes = [route_status(r, feed, now=now, window_s=window_s) for r in recorders]
    routes.sort(key=lambda r: r["name"])
    return {"version": 1, "time": round(now, 3), "window_s": window_s, "actions": list(ACTIONS),
            "feed": feed.summary() if feed is not None else None, "routes": routes}


def _dialect_mix(route: dict[str, Any]) -> str:
    host = route["dialects"]["host"]
    return "/".join(str(host[d]["in_window"]) for d in ("standard", "legacy", "none"))


def table(status: dict[str, Any]) -> str:
    """The readiness table `reminder-bridge status` prints; every cell safe for a terminal
    (bridge.display: peers choose the client names it shows)."""
    header = ("ROUTE", "PROTOCOL", "STAGE", "HOSTS std/legacy/none", "LEGACY HOSTS", "READY FOR ENFORCE")
    rows = [header]
    for route in status.get("routes", []):
        ready = route["readiness"]
        names = safe_text(", ".join(ready["legacy_hosts"]), 39) or "-"
        rows.append((safe_text(route["name"]), safe_text(route.get("protocol") or "?"),
                     safe_text(route.get("stage") or "?"), _dialect_mix(route), names,
                     safe_text(f"{ready['verdict']} — {ready['evidence']}", None)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths)) + "  " + row[-1] for row in rows]
    notes = [f"  {safe_text(route['name'])}: {safe_text(route['readiness']['note'], None)}"
             for route in status.get("routes", []) if route["readiness"].get("note")]
    window = span_text(float(status.get("window_s", DEFAULT_WINDOW_S)))
    footer = [f"window: the last {window}; hosts are handshakes in the window"]
    if not status.get("routes"):
        lines.append("(no routes)")
    return "\n".join(lines + footer + (["notes:"] + notes if notes else [])) + "\n"
