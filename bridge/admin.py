"""The admin port: `/healthz`, `/readyz` and Prometheus `/metrics` (SPEC §9), loopback by default."""
from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from bridge.telemetry import Recorder


def prometheus_text(recorder: Recorder) -> str:
    lines = ["# HELP reminder_bridge_reminders_total Reminders by protocol, route and action.",
             "# TYPE reminder_bridge_reminders_total counter"]
    for (protocol, route, action), count in sorted(recorder.counts.items()):
        lines.append(f'reminder_bridge_reminders_total{{protocol="{protocol}",route="{route}",action="{action}"}} {count}')
    return "\n".join(lines) + "\n"


def split_hostport(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


async def start_admin(listen: str, recorder: Recorder, ready: Callable[[], bool]) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ready\n") if ready() else web.Response(status=503, text="not ready\n")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=prometheus_text(recorder), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = split_hostport(listen)
    await web.TCPSite(runner, host, port).start()
    recorder.info("admin_listening", listen=f"{host}:{port}")
    return runner
