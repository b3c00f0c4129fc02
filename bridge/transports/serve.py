"""`reminder-bridge serve` command line: routes from a rules file (or one `--upstream`), hot reload,
the admin port. Kept apart from the transport so other commands start without aiohttp."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridge.policy import Policy
from bridge.policy.reload import POLL, Loaded, RulesFile
from bridge.rules import Rules, RouteSettings
from bridge.telemetry import Tracing

if TYPE_CHECKING:
    from bridge.transports.http import HttpProxy, HttpRoute


def add_serve_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="HTTP/SSE/WebSocket proxy: routes from a rules file, or one --upstream")
    p.add_argument("--rules", help="rules file whose routes have `path` and `upstream`")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT", help="default 127.0.0.1:8080")
    p.add_argument("--admin", metavar="HOST:PORT", help="serve /healthz, /readyz and /metrics here")
    p.add_argument("--protocol", choices=("mcp", "a2a", "acp"), help="one-route shortcut: the protocol")
    p.add_argument("--upstream", help="one-route shortcut: the upstream base URL (http(s):// or ws(s)://)")
    p.add_argument("--host-dialect", choices=("auto", "standard", "legacy", "none"))
    p.add_argument("--peer-dialect", choices=("auto", "standard", "legacy", "none"))
    p.add_argument("--upstream-timeout", type=float, default=300.0,
                   help="seconds to wait for an upstream to start answering (default 300)")
    p.set_defaults(func=_cmd_serve)


def build_routes(args: Any, rules: Rules | None, tracing: Tracing | None = None) -> list[HttpRoute]:
    from bridge.transports.http import HttpRoute

    dialects = {"host_dialect": args.host_dialect, "peer_dialect": args.peer_dialect}
    log_level = getattr(args, "log_level", "warning")
    if rules is not None:
        routes = [HttpRoute(name, r.protocol, r.path or "", r.upstream, r, dialects,
                            Policy(r, rules.global_budget, route=name), tracing, log_level)
                  for name, r in rules.routes.items() if r.upstream]
        if not routes:
            raise ValueError(f"{args.rules}: no route has an `upstream` to serve")
        return routes
    if not (args.protocol and args.upstream):
        raise ValueError("give --rules FILE, or --protocol and --upstream for one route")
    return [HttpRoute("default", args.protocol, "", args.upstream, RouteSettings(), dialects, None, tracing,
                      log_level)]


def _cmd_serve(args: Any) -> int:
    from bridge.admin import split_hostport
    from bridge.rules import RulesError, load_rules

    rules = None
    try:
        rules = load_rules(args.rules) if args.rules else None
        tracing = Tracing.from_settings(rules.telemetry) if rules is not None else Tracing()
    except (RulesError, RuntimeError) as exc:
        sys.stderr.write(f"reminder-bridge serve: {exc}\n")
        return 2
    try:
        routes = build_routes(args, rules, tracing)
    except ValueError as exc:
        sys.stderr.write(f"reminder-bridge serve: {exc}\n")
        return 2
    from bridge.transports.http import HttpProxy

    host, port = split_hostport(args.listen)
    proxy = HttpProxy(routes, args.upstream_timeout)
    admin, token = args.admin, os.environ.get("REMINDER_BRIDGE_ADMIN_TOKEN", "")
    if rules is not None:
        if admin is None and "admin" in rules.model_fields_set:
            admin = rules.admin.listen
        token = rules.admin.token or token
    reloader = Reloader(args.rules, proxy) if args.rules else None
    try:
        return asyncio.run(_run(proxy, host, port, admin, token=token, reloader=reloader))
    finally:
        tracing.shutdown()


class Reloader:
    """Hot reload for `serve` (SPEC §7): on SIGHUP and when the file changes, every route's open
    pipelines take the new rules for new messages; budgets keep their state; a bad file is refused
    with the problems `check` prints and the old rules stay. Routes are matched by name; adding or
    removing routes needs a restart."""

    def __init__(self, path: str, proxy: HttpProxy):
        self.proxy = proxy
        self.file = RulesFile(path, lambda rules: rules.defaults)

    def poll(self) -> None:
        result = self.file.poll()
        if result is not None:
            self.apply(result, "file changed")

    def apply(self, result: Any, trigger: str) -> None:
        log = self.proxy.routes[0].recorder
        if not isinstance(result, Loaded):
            log.log("reload_refused", level="error", file=str(self.file.path), trigger=trigger, problems=result.lines,
                    why="the rules file has problems; keeping the previous rules")
            return
        for route in self.proxy.routes:
            settings = result.rules.routes.get(route.name)
            if settings is None:
                continue
            route.apply(settings, Policy(settings, result.rules.global_budget, route=route.name,
                                         state=route.policy.state if route.policy else None))
        log.log("rules_reloaded", level="info", file=str(self.file.path), trigger=trigger)


#: Seconds a SIGTERM waits for requests and streams in flight before cutting them off.
SHUTDOWN_GRACE = 10.0


async def _run(proxy: HttpProxy, host: str, port: int, admin: str | None, *, token: str = "",
               reloader: Reloader | None = None, started: Callable[[int], None] | None = None) -> int:
    from aiohttp import web

    runner = web.AppRunner(proxy.app, access_log=None, handler_cancellation=True, shutdown_timeout=SHUTDOWN_GRACE)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    sys.stderr.write(json.dumps({"event": "listening", "listen": f"{host}:{bound}",
                                 "routes": [{"name": r.name, "prefix": r.prefix or "/", "upstream": r.upstream,
                                             "protocol": r.protocol} for r in proxy.routes]}) + "\n")
    admin_runner = None
    if admin:
        from bridge.admin import start_admin

        admin_runner = await start_admin(admin, proxy.routes[0].recorder, ready=lambda: True, token=token)
    if started:
        started(bound)
    loop = asyncio.get_running_loop()
    watcher = None
    if reloader is not None:
        loop.add_signal_handler(signal.SIGHUP, lambda: reloader.apply(reloader.file.reload(), "SIGHUP"))

        async def watch() -> None:
            while True:
                await asyncio.sleep(POLL)
                reloader.poll()

        watcher = asyncio.create_task(watch())
    stop = asyncio.Event()  # SIGTERM / SIGINT: stop listening, let requests in flight finish, then exit
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if watcher is not None:
            watcher.cancel()
        if admin_runner:
            await admin_runner.cleanup()
        await runner.cleanup()
    return 0
