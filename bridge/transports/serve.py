"""`reminder-bridge serve` command line: routes from a rules file (or one `--upstream`), limits, hot
reload, the admin port. Kept apart from the transport so other commands start without aiohttp."""
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
from bridge.rules import Limits, Rules, RouteSettings, check_origins
from bridge.telemetry import Tracing

if TYPE_CHECKING:
    from bridge.transports.http import HttpProxy, HttpRoute

#: `--flag` → the `[limits]` key it overrides.
LIMIT_FLAGS = {
    "max_connections": ("--max-connections", int, "open client connections (default: half the descriptor limit)"),
    "header_timeout_s": ("--header-timeout", float, "seconds for a client to send a request's headers (default 15)"),
    "idle_timeout_s": ("--idle-timeout", float, "seconds a keep-alive connection may idle (default 60)"),
    "body_timeout_s": ("--body-timeout", float, "seconds for a client to send a request body (default 60)"),
    "max_body_bytes": ("--max-body-bytes", int, "largest request body (default 64 MiB)"),
    "max_inflight_bytes": ("--max-inflight-bytes", int, "bodies and answers held in memory at once (default 512 MiB)"),
    "max_response_bytes": ("--max-response-bytes", int, "largest upstream answer read whole (default 64 MiB)"),
    "max_event_bytes": ("--max-event-bytes", int, "largest server-sent event (default 64 MiB)"),
    "max_sessions": ("--max-sessions", int, "MCP sessions kept per route (default 10000)"),
    "session_idle_s": ("--session-idle", float, "seconds an unused MCP session is kept (default 3600)"),
}


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
    p.add_argument("--allowed-origin", action="append", metavar="ORIGIN",
                   help="a browser origin every route accepts (repeat for more; `*` for any, `loopback` for "
                        "localhost); default: the rules' allowed_origins, else loopback origins only")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
                   help="JSON log lines on stderr (default warning)")
    for key, (flag, kind, text) in LIMIT_FLAGS.items():
        p.add_argument(flag, dest=key, type=kind, metavar="N", help=text)
    p.set_defaults(func=_cmd_serve)


def build_limits(args: Any, rules: Rules | None) -> Limits:
    base = rules.limits if rules is not None else Limits()
    given = {key: getattr(args, key) for key in LIMIT_FLAGS if getattr(args, key, None) is not None}
    return Limits.model_validate({**base.model_dump(), **given}) if given else base


def build_routes(args: Any, rules: Rules | None, tracing: Tracing | None = None,
                 limits: Limits | None = None) -> list[HttpRoute]:
    from bridge.transports.http import HttpRoute

    dialects = {"host_dialect": args.host_dialect, "peer_dialect": args.peer_dialect}
    log_level = getattr(args, "log_level", "warning")
    limits = limits or Limits()
    origins = check_origins(args.allowed_origin) if getattr(args, "allowed_origin", None) else None

    def settings_of(route: RouteSettings) -> RouteSettings:
        return route.model_copy(update={"allowed_origins": origins}) if origins else route

    if rules is not None:
        routes = [HttpRoute(name, r.protocol, r.path or "", r.upstream, settings_of(r), dialects,
                            Policy(settings_of(r), rules.global_budget, route=name), tracing, log_level, limits)
                  for name, r in rules.routes.items() if r.upstream]
        if not routes:
            raise ValueError(f"{args.rules}: no route has an `upstream` to serve")
        return routes
    if not (args.protocol and args.upstream):
        raise ValueError("give --rules FILE, or --protocol and --upstream for one route")
    try:
        settings = settings_of(RouteSettings(upstream=args.upstream))
    except ValueError as exc:
        raise ValueError(f"--upstream: {exc}") from None
    if args.protocol == "acp" and not args.upstream.startswith(("ws://", "wss://")):
        raise ValueError("ACP has no HTTP transport: give --protocol acp a ws:// or wss:// --upstream, or run the "
                         "agent with `reminder-bridge stdio`")
    return [HttpRoute("default", args.protocol, "", args.upstream, settings, dialects, None, tracing, log_level,
                      limits)]


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
        limits = build_limits(args, rules)
        routes = build_routes(args, rules, tracing, limits)
    except ValueError as exc:
        sys.stderr.write(f"reminder-bridge serve: {exc}\n")
        return 2
    from bridge.transports.http import HttpProxy

    host, port = split_hostport(args.listen)
    proxy = HttpProxy(routes, args.upstream_timeout, limits)
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
    with the problems `check` prints and the old rules stay. Routes are matched by name: a running
    route missing from the new file keeps its rules, and adding or removing routes needs a restart.
    The log line and `reminder_bridge_rules_reloads_total` say, route by route, what happened."""

    def __init__(self, path: str, proxy: HttpProxy):
        self.proxy = proxy
        self.file = RulesFile(path, lambda rules: rules.defaults)

    def poll(self) -> None:
        result = self.file.poll()
        if result is not None:
            self.apply(result, "file changed")

    def apply(self, result: Any, trigger: str) -> bool:
        routes = self.proxy.routes
        log = routes[0].recorder
        file = str(self.file.path)
        if not isinstance(result, Loaded):
            for route in routes:
                route.recorder.reloads["refused"] += 1
            log.log("reload_refused", level="error", file=file, trigger=trigger, problems=result.lines,
                    why="the rules file has problems; keeping the previous rules")
            return False
        present = [r for r in routes if r.name in result.rules.routes]
        missing = [r.name for r in routes if r.name not in result.rules.routes]
        new = sorted(set(result.rules.routes) - {r.name for r in routes})
        if not present:
            for route in routes:
                route.recorder.reloads["refused"] += 1
            log.log("reload_refused", level="error", file=file, trigger=trigger, missing=missing,
                    new_routes=new or None,
                    why=f"none of the running routes ({', '.join(missing)}) is in the file; keeping the previous "
                        f"rules (adding or removing routes needs a restart)")
            return False
        for route in present:
            settings = result.rules.routes[route.name]
            route.apply(settings, Policy(settings, result.rules.global_budget, route=route.name,
                                         state=route.policy.state if route.policy else None))
            route.recorder.reloads["ok"] += 1
        for route in routes:
            if route.name in missing:
                route.recorder.reloads["refused"] += 1
        why = None
        if missing or new:
            why = ("routes missing from the file keep their rules; " if missing else "") + \
                  ("new routes need a restart" if new else "")
        log.log("rules_reloaded", level="info" if not why else "warning", file=file, trigger=trigger,
                applied=[r.name for r in present], kept=missing or None, new_routes=new or None, why=why)
        return True


#: Seconds a SIGTERM waits for requests and streams in flight before cutting them off.
SHUTDOWN_GRACE = 10.0


async def _run(proxy: HttpProxy, host: str, port: int, admin: str | None, *, token: str = "",
               reloader: Reloader | None = None, started: Callable[[int], None] | None = None) -> int:
    from aiohttp import web

    from bridge.admin import AdminError
    from bridge.transports.guard import guarded_site

    loop = asyncio.get_running_loop()
    proxy.guard.install(loop)
    runner = web.AppRunner(proxy.app, access_log=None, handler_cancellation=True, shutdown_timeout=SHUTDOWN_GRACE,
                           keepalive_timeout=proxy.limits.idle_timeout_s)
    await runner.setup()
    try:
        await guarded_site(runner, host, port, proxy.guard).start()
    except OSError as exc:
        await runner.cleanup()
        sys.stderr.write(f"reminder-bridge serve: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        return 2
    bound = runner.addresses[0][1] if runner.addresses else port
    sys.stderr.write(json.dumps({"event": "listening", "listen": f"{host}:{bound}",
                                 "max_connections": proxy.guard.max_connections,
                                 "routes": [{"name": r.name, "prefix": r.prefix or "/", "upstream": r.target.shown,
                                             "protocol": r.protocol} for r in proxy.routes]}) + "\n")
    admin_runner = None
    if admin:
        from bridge.admin import start_admin

        try:
            admin_runner = await start_admin(admin, proxy.routes[0].recorder, ready=lambda: True, token=token)
        except AdminError as exc:
            await runner.cleanup()
            sys.stderr.write(f"reminder-bridge serve: {exc}\n")
            return 2
    if started:
        started(bound)
    watcher = None
    log = proxy.routes[0].recorder
    if reloader is not None:
        loop.add_signal_handler(signal.SIGHUP, lambda: reloader.apply(reloader.file.reload(), "SIGHUP"))

        async def watch() -> None:
            while True:
                await asyncio.sleep(POLL)
                reloader.poll()

        watcher = asyncio.create_task(watch())
    else:
        loop.add_signal_handler(signal.SIGHUP, lambda: log.log(
            "reload_skipped", level="warning", trigger="SIGHUP", why="no rules file was given (--rules); nothing "
                                                                     "to reload"))
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
