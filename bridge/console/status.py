"""`/api/status`: per route, what the proxy is and does, and whether it may move to `enforce`.

The migration-readiness rule (docs/console.md#readiness): a route is **ready for enforce** when,
in the window (default 24 h), no host announced the legacy dialect in its handshake and no
reminder reached the proxy from the host side in the legacy dialect (ACP `session/remind`, A2A
`metadata.harn`).  The verdict names the legacy hosts (their clientInfo names) when it is "no",
and the evidence when it is "yes" (how many hosts, in which dialects), saying so when nothing
was seen in the window; a route that has seen nothing at all since it started says "no traffic
yet" instead of a verdict.  Hosts are counted, not their handshakes (`feed.identity`).  A window
that reaches back before start-up says "since start-up", not "in the last 24 h": the proxy saw
only that much.

An MCP route's era mix (docs/console.md#era-mix) beside it: hosts and servers seen per MCP
revision, the requests the era bridge took, and whether the route still needs the bridge (hosts of
the other revision than the server's seen in the window, named as the legacy hosts are).
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from bridge.console.feed import DIALECTS, ERAS, SIDES, Feed, RouteStats, Seen, Series
from bridge.console.timeline import MINUTE_S, MINUTES
from bridge.display import safe_text
from bridge.state.base import StateUnavailable
from bridge.telemetry import ACTIONS

#: The readiness window unless `[admin] readiness_window_h` or `?window=` says otherwise.
DEFAULT_WINDOW_S = 24 * 3600.0
#: The actions every route lists (zero when nothing happened), in the order the console shows them.
SHOWN_ACTIONS = ("rewritten", "passed", "queued", "coalesced", "dropped", "rate_limited", "refused", "invalid",
                 "rendered", "attached", "synthesized")
#: What each queue of `Recorder.pending` holds, in the words the page shows ("held now: 4 waiting
#: for the host's next request").
HELD = {"coalesce": "over budget, waiting for tokens", "tool_result": "waiting to ride the next tool result",
        "ride": "sent as channel events, waiting to ride the next tool result too",
        "host": "waiting for the host's next request", "hold": "waiting for the next prompt to the agent",
        "initialize": "waiting for the agent's initialize answer", "task": "waiting for the task's next message",
        "stream": "waiting for the stream's next event"}
NO_TRAFFIC = "no traffic yet"


def span_text(seconds: float) -> str:
    """86400 -> "24 h", 1800 -> "30 min", 90 -> "90 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def ago_text(seconds: float) -> str:
    """How long ago, roughly: 4 -> "4 s", 200 -> "3 min", 9000 -> "2.5 h", 200000 -> "2.3 d"."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _window(now: float, window_s: float, started: float | None) -> tuple[float, bool, str]:
    """Where the window starts, whether it reaches back before start-up, and how the verdicts say so."""
    cutoff = now - window_s
    partial = started is not None and started > cutoff
    return cutoff, partial, "since start-up" if partial else f"in the last {span_text(window_s)}"


def _named(hosts: list[Seen]) -> str:
    """"ci-bot, old-ide; 1 without a clientInfo name": who they are, the first ten by name."""
    names = sorted({host.name for host in hosts if host.name})
    unnamed = sum(1 for host in hosts if not host.name)
    shown = ", ".join(names[:10]) + (f", … {len(names) - 10} more" if len(names) > 10 else "")
    nameless = "" if not unnamed else f"{unnamed} without a clientInfo name" if names else "without a clientInfo name"
    return "; ".join(part for part in (shown, nameless) if part)


def readiness(stats: RouteStats | None, *, protocol: str | None, stage: str | None, now: float,
              window_s: float, decisions: int = 0, started: float | None = None) -> dict[str, Any]:
    """The verdict for one route (see the module docstring for the rule); ``decisions``: how many
    reminder decisions the route counted since it started; ``started``: when the statistics began
    (`Feed.started`), for a window that reaches back before it."""
    cutoff, partial, during = _window(now, window_s, started)
    stats = stats or RouteStats()
    hosts = stats.seen("host", cutoff)
    mix = {d: sum(1 for host in hosts if host.dialect == d) for d in DIALECTS}
    at_least = "" if stats.complete("host", cutoff) else "at least "
    legacy = [host for host in hosts if host.dialect == "legacy"]
    names = sorted({host.name for host in legacy if host.name})
    inputs = stats.legacy_input.since(cutoff)
    seen = bool(hosts) or inputs > 0
    reasons: list[str] = []
    if legacy:
        reasons.append(f"{at_least}{_plural(len(legacy), 'legacy host')} seen {during} ({_named(legacy)})")
    if inputs:
        reasons.append(f"{_plural(inputs, 'legacy reminder')} from the host side {during}")
    ready: bool | None
    if reasons:
        verdict, ready = "no", False
        evidence = "; ".join(reasons)
    elif seen:
        verdict, ready = "yes", True
        kinds = ", ".join(f"{mix[d]} {d}" for d in ("standard", "none") if mix[d])
        evidence = (f"no legacy host {during}: {at_least}{_plural(len(hosts), 'host')} ({kinds}), "
                    "no legacy reminder from the host side")
    elif decisions or stats.traffic():
        verdict, ready = "yes", True
        evidence = f"nothing seen {during}: no host and no reminder from the host side"
    else:
        verdict, ready = NO_TRAFFIC, None
        evidence = "no host has connected and no reminder has passed since the route started"
    note = None
    if stage == "enforce":
        note = "the route is already at enforce: legacy reminders from the host side are refused"
    elif protocol == "mcp":
        note = "MCP reminders only flow toward the host, so for MCP enforce acts like translate"
    text = f"{NO_TRAFFIC} — {evidence}" if ready is None else f"ready for enforce: {verdict} — {evidence}"
    return {"ready": ready, "verdict": verdict, "seen": seen, "text": text, "evidence": evidence,
            "window_s": window_s, "since": round(started if partial else cutoff, 3), "since_start_up": partial,
            "legacy_hosts": names, "hosts": mix, "hosts_complete": not at_least,
            "host_handshakes": {d: s.since(cutoff) for d, s in stats.dialects["host"].items()},
            "legacy_inputs": inputs, "note": note}


def _mix(table: dict[str, Series], seen: list[Seen], on: Callable[[Seen, str], bool], cutoff: float) -> dict[str, Any]:
    """Per dialect or MCP era: handshakes since start-up (`count`) and in the window, the hosts (or
    peers) of ``seen`` that are ``on`` it, and when the last handshake came."""
    return {k: {"count": s.count, "in_window": s.since(cutoff), "hosts": sum(1 for host in seen if on(host, k)),
                "last_seen": None if s.last is None else round(s.last, 3)}
            for k, s in table.items()}


def _in_dialect(host: Seen, dialect: str) -> bool:
    return host.dialect == dialect


def _on_era(host: Seen, era: str) -> bool:
    """A host is on the era it spoke last."""
    return host.era == era


def _speaks(cutoff: float) -> Callable[[Seen, str], bool]:
    return lambda peer, era: peer.speaks(era, cutoff)


def era_readiness(stats: RouteStats | None, *, bridging: str | None, bridged: int, now: float, window_s: float,
                  started: float | None = None) -> dict[str, Any]:
    """Whether an MCP route still needs the era bridge: with the bridge on (``bridging``: the
    server's era, `RouteSettings.bridged_server_era`), it does while hosts of the other era are seen
    in the window (named, as legacy hosts are); a route without one relies on none. ``bridged``: the
    requests it took since the route started."""
    cutoff, _, during = _window(now, window_s, started)
    stats = stats or RouteStats()
    hosts = [host for host in stats.seen("host", cutoff) if host.era is not None]
    on = {era: [host for host in hosts if _on_era(host, era)] for era in ERAS}
    at_least = "" if stats.complete("host", cutoff) else "at least "
    counted = f"; {_plural(bridged, 'request')} bridged since the route started" if bridged else ""
    needed: bool | None
    across: list[Seen] = []
    if bridging is not None:
        other = next(era for era in ERAS if era != bridging)
        across = on[other]
        if across:
            talk = "talks" if len(across) == 1 else "talk"
            needed, text = True, (f"still needs the era bridge — {at_least}{_plural(len(across), 'host')} on {other} "
                                  f"({_named(across)}) {talk} to a {bridging}-only server through the bridge {during}")
        elif hosts:
            needed, text = False, (f"the era bridge is idle — no host on {other} {during}: {at_least}"
                                   f"{_plural(len(hosts), 'host')}, all on {bridging}, the server's era")
        else:
            needed, text = None, f"the era bridge saw no host {during}"
    else:  # each host's era reaches the server as it is: nothing relies on a bridge
        mix = ", ".join(f"{len(on[era])} on {era}" for era in ERAS if on[era])
        seen = f"{at_least}{_plural(len(hosts), 'host')} {during} ({mix}), each passed to the server in its own era" \
            if hosts else f"no host seen {during}"
        needed, text = False, f"no era bridge on this route — {seen}"
    return {"needed": needed, "text": text + counted, "hosts": {era: len(on[era]) for era in ERAS},
            "bridged_hosts": sorted({host.name for host in across if host.name})}


def era_mix(recorder: Any, stats: RouteStats | None, settings: Any, *, now: float, window_s: float,
            started: float | None) -> dict[str, Any]:
    """An MCP route's part of `/api/status` on its eras: the route's `host_era` / `server_era`, hosts
    and servers per era (as `dialects` counts them), the requests bridged, and `era_readiness`."""
    stats = stats or RouteStats()
    cutoff = now - window_s
    host_era, server_era = getattr(settings, "host_era", "auto"), getattr(settings, "server_era", "auto")
    bridged = [{"host_era": h, "server_era": s, "requests": n}
               for (_, h, s), n in sorted(recorder.bridged_requests.items())]
    total = sum(b["requests"] for b in bridged)
    return {"host_era": host_era, "server_era": server_era,
            "hosts": _mix(stats.eras["host"], stats.seen("host", cutoff), _on_era, cutoff),
            "servers": _mix(stats.eras["peer"], stats.seen("peer", cutoff), _speaks(cutoff), cutoff),
            "bridged": bridged, "bridged_requests": total,
            "readiness": era_readiness(stats, bridging=getattr(settings, "bridged_server_era", None), bridged=total,
                                       now=now, window_s=window_s, started=started)}


def _clients(stats: RouteStats, side: str, limit: int = 50) -> list[dict[str, Any]]:
    """The names hosts (or peers) gave, most recently seen first: how many hosts gave each, in
    which dialect, and their handshakes."""
    names: dict[tuple[str, str], dict[str, Any]] = {}
    for host in reversed(stats.hosts[side].values()):
        if host.name is None:
            continue
        row = names.get((host.name, host.dialect))
        if row is None:
            if len(names) >= limit:
                continue
            row = names[(host.name, host.dialect)] = {"name": host.name, "dialect": host.dialect, "hosts": 0,
                                                      "count": 0, "last_seen": round(host.last, 3)}
        row["hosts"] += 1
        row["count"] += host.handshakes
    return list(names.values())


def route_status(recorder: Any, feed: Feed | None, *, now: float, window_s: float) -> dict[str, Any]:
    """One route's part of `/api/status` (docs/console.md#get-apistatus)."""
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
    budgets = budget_gauges(source)
    pending: Counter[str] = Counter()
    for (_, _, queue), n in recorder.pending().items():
        if n:
            pending[queue] += n
    cutoff = now - window_s
    stats_or_empty = stats or RouteStats()
    started = feed.started if feed is not None else None
    return {
        "name": recorder.route,
        "transport": source.get("transport"),
        "protocol": protocol,
        "stage": stage,
        "sessions": source.get("sessions"),
        "since": round(recorder.started, 3),
        "dialects": {side: _mix(stats_or_empty.dialects[side], stats_or_empty.seen(side, cutoff), _in_dialect,
                                cutoff) for side in SIDES},
        "clients": {side: _clients(stats_or_empty, side) for side in SIDES},
        "actions": {**{a: actions.get(a, 0) for a in SHOWN_ACTIONS},
                    **{a: n for a, n in sorted(actions.items()) if a not in SHOWN_ACTIONS}},
        "budget_rejections": sum(recorder.budget_rejections.values()),
        "trust_refusals": sum(recorder.trust_refusals.values()),
        "budgets": budgets,
        "pending": dict(sorted(pending.items())),
        "pending_total": sum(pending.values()),
        "held": [{"queue": queue, "count": n, "label": HELD.get(queue, f"in the {queue} queue")}
                 for queue, n in sorted(pending.items())],
        "readiness": readiness(stats, protocol=protocol, stage=stage, now=now, window_s=window_s,
                               decisions=sum(actions.values()), started=started),
        "eras": era_mix(recorder, stats, source.get("settings"), now=now, window_s=window_s, started=started)
        if protocol == "mcp" else None,
        "series": feed.timeline.series(recorder.route, budgets) if feed is not None else None,
    }


def budget_gauges(source: dict[str, Any]) -> list[dict[str, Any]]:
    """The route's budgets as gauges, read now without charging anything (``source``: `_source`)."""
    policy = source.get("policy")
    if policy is None or not hasattr(policy, "gauges"):
        return []
    return policy.gauges(time.monotonic())


async def sample_budgets(recorders: Iterable[Any], feed: Feed) -> None:
    """Every `timeline.SAMPLE_S` (the admin port's clock): every route's budgets into its chart."""
    shown = list(recorders)
    await refresh_shared_levels(shown)
    for recorder in shown:
        feed.timeline.budgets(recorder.route, budget_gauges(_source(recorder)))


async def refresh_shared_levels(recorders: Iterable[Any]) -> None:
    """Budget gauges on shared state are read from Redis, once per page load, before drawing."""
    for recorder in recorders:
        policy = _source(recorder).get("policy")
        if policy is not None and getattr(policy, "shared", None) is not None and (charges := policy.shown_buckets()):
            try:
                policy.show_levels(charges, await policy.shared.levels(charges))
            except StateUnavailable:
                pass


def build_status(recorders: Iterable[Any], feed: Feed | None, *, window_s: float = DEFAULT_WINDOW_S,
                 now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    shown = list(recorders)
    routes = [route_status(r, feed, now=now, window_s=window_s) for r in shown]
    routes.sort(key=lambda r: r["name"])
    return {"version": 1, "time": round(now, 3), "window_s": window_s, "actions": list(ACTIONS),
            "since": round(min((r.started for r in shown), default=now), 3),
            "series_s": MINUTES * MINUTE_S,
            "feed": feed.summary() if feed is not None else None, "routes": routes}


def _dialect_mix(route: dict[str, Any]) -> str:
    hosts = route["readiness"]["hosts"]
    return "/".join(str(hosts[d]) for d in ("standard", "legacy", "none"))


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
    notes += [f"  {safe_text(route['name'])}: {safe_text(route['eras']['readiness']['text'], None)}"
              for route in status.get("routes", []) if (route.get("eras") or {}).get("readiness", {}).get("needed")]
    window_s = float(status.get("window_s", DEFAULT_WINDOW_S))
    up = float(status.get("time", 0)) - float(status.get("since", 0))
    since = f" (the proxy started {ago_text(up)} ago: counted since then)" if up < window_s else ""
    footer = [f"window: the last {span_text(window_s)}{since}; hosts seen in the window, each counted once "
              "(not per request)"]
    if not status.get("routes"):
        lines.append("(no routes)")
    return "\n".join(lines + footer + (["notes:"] + notes if notes else [])) + "\n"
