"""The admin port (SPEC §9): `/healthz`, `/readyz` and Prometheus `/metrics`, loopback by default.

With a token configured every request must send `Authorization: Bearer TOKEN`; without one,
binding anywhere but loopback is logged as a warning.
"""
from __future__ import annotations

import errno
import hmac
import ipaddress
from collections.abc import Callable, Iterable

from aiohttp import web

from bridge.telemetry import LATENCY_BUCKETS, Recorder, collectors, recorders

TOKEN_ENV = "REMINDER_BRIDGE_ADMIN_TOKEN"


class AdminError(RuntimeError):
    """The admin port could not be served (e.g. its address is in use): said in one line, no traceback."""


def _labels(**labels: str) -> str:
    def esc(v: str) -> str:
        return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


def prometheus_text(recorder: Recorder | Iterable[Recorder]) -> str:
    """Every metric of ``recorder`` (or of several, e.g. one per HTTP route) in the text format."""
    group = [recorder] if isinstance(recorder, Recorder) else list(recorder)
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for suffix, labels, value in samples:
            out.append(f"{name}{suffix}{_labels(**labels) if labels else ''} {_num(value)}")

    family("reminder_bridge_reminders_total", "counter",
           "Reminder decisions by protocol, route, action and the stage they were taken in (observe: would have).",
           [("", {"protocol": p, "route": r, "action": a, "stage": s}, n)
            for rec in group for (p, r, a, s), n in sorted(rec.staged.items())])
    family("reminder_bridge_budget_rejections_total", "counter",
           "Reminders over budget, by the kind of bucket that refused; shadow=\"true\" were only counted.",
           [("", {"protocol": p, "route": r, "scope": k, "shadow": sh}, n)
            for rec in group for (p, r, k, sh), n in sorted(rec.budget_rejections.items())])
    family("reminder_bridge_trust_refusals_total", "counter",
           "Reminders refused by a trust limit, by the limit.",
           [("", {"protocol": p, "route": r, "limit": lim}, n)
            for rec in group for (p, r, lim), n in sorted(rec.trust_refusals.items())])
    hist: list[tuple[str, dict[str, str], float]] = []
    for rec in group:
        for (p, r), h in sorted(rec.latency.items()):
            cumulative = 0
            for bound, n in zip((*LATENCY_BUCKETS, float("inf")), h.counts):
                cumulative += n
                hist.append(("_bucket", {"protocol": p, "route": r, "le": _num(bound)}, cumulative))
            hist.append(("_sum", {"protocol": p, "route": r}, h.sum))
            hist.append(("_count", {"protocol": p, "route": r}, h.count))
    family("reminder_bridge_rewrite_duration_seconds", "histogram",
           "Time to decode, police and re-encode a message the proxy rewrote.", hist)
    family("reminder_bridge_pending_reminders", "gauge",
           "Reminders held now, by queue (coalesce, hold, tool_result, ...).",
           [("", {"protocol": p, "route": r, "queue": q}, n)
            for rec in group for (p, r, q), n in sorted(rec.pending().items())])
    family("reminder_bridge_rules_reloads_total", "counter", "Rules reloads, applied or refused, by route.",
           [("", {"route": rec.route, "result": res}, n) for rec in group for res, n in sorted(rec.reloads.items())])
    family("reminder_bridge_sessions_ended_total", "counter",
           "serve: MCP sessions whose state the proxy dropped: evicted (the table was full), expired (idle), "
           "closed (DELETE).",
           [("", {"route": rec.route, "reason": why}, n) for rec in group for why, n in sorted(rec.sessions_ended.items())])
    family("reminder_bridge_http_refused_total", "counter",
           "serve: requests the proxy refused itself, by reason (origin, max_body_bytes, max_inflight_bytes).",
           [("", {"route": rec.route, "reason": why}, n) for rec in group for why, n in sorted(rec.http_refused.items())])
    for collector in collectors():
        for name, kind, help_text, samples in collector.families():
            family(name, kind, help_text, samples)
    return "\n".join(out) + "\n"


def _num(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def split_hostport(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def start_admin(listen: str, recorder: Recorder, ready: Callable[[], bool], *, token: str = "",
                      every_recorder: bool = True) -> web.AppRunner:
    """Serve the admin port.  ``every_recorder``: metrics of every live Recorder in the process
    (one per HTTP route), else of ``recorder`` alone."""

    @web.middleware
    async def auth(request: web.Request, handler):
        if token:
            scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                return web.Response(status=401, text="missing or wrong bearer token\n",
                                    headers={"WWW-Authenticate": 'Bearer realm="reminder-bridge admin"'})
        return await handler(request)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ready\n") if ready() else web.Response(status=503, text="not ready\n")

    async def metrics(_: web.Request) -> web.Response:
        text = prometheus_text(recorders() if every_recorder else recorder)
        return web.Response(text=text, content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})

    app = web.Application(middlewares=[auth])
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = split_hostport(listen)
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise AdminError(f"cannot serve the admin port on {host}:{port}: {exc.strerror or exc}"
                         f"{' (another process listens there)' if exc.errno == errno.EADDRINUSE else ''}") from None
    bound = runner.addresses[0] if runner.addresses else (host, port)
    if not token and not is_loopback(host):
        recorder.warning("admin_exposed", listen=f"{host}:{bound[1]}",
                         why="the admin port is not on loopback and has no bearer token ([admin] token)")
    recorder.info("admin_listening", listen=f"{host}:{bound[1]}", port=bound[1])
    return runner
