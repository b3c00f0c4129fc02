"""`reminder-bridge serve`: routes from a rules file (or one `--upstream`), limits, hot reload, the
admin port, around the HTTP transport (imported only when the command runs, so other commands
start without aiohttp)."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridge.cli import options
from bridge.cli.listening import announce
from bridge.cli.options import add_command
from bridge.cli.readiness import degraded
from bridge.dialects.hosts import host_dialect_problem
from bridge.logs import configure as configure_logging
from bridge.rules import HOST_DIALECTS, UNNAMED_ROUTE, Limits, Rules, RouteSettings

if TYPE_CHECKING:  # imported when `serve` runs: every other command starts without them
    from bridge.cli import workers
    from bridge.policy.reload import RulesFile
    from bridge.telemetry import Tracing
    from bridge.transports.http.routes import HttpRoute
    from bridge.transports.http.server import HttpProxy

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
    "max_children": ("--max-children", int, "stdio servers an --upstream-command route runs at once (default 100)"),
}


EXAMPLES = [
    ("reminder-bridge serve --protocol mcp --upstream http://127.0.0.1:3000/mcp",
     "hosts use http://127.0.0.1:8080/mcp: every path goes to the upstream unchanged"),
    ("reminder-bridge serve --protocol mcp --upstream https://mcp.example/mcp --header 'Authorization: Bearer ${TOKEN}'",
     "send a header on every upstream request; ${TOKEN} is read from this environment (not from argv)"),
    ("reminder-bridge serve --protocol a2a --upstream http://127.0.0.1:9999 --listen 127.0.0.1:9000",
     "an A2A agent: callers fetch its card from http://127.0.0.1:9000/.well-known/agent-card.json"),
    ("reminder-bridge serve --protocol mcp --upstream-command -- python -m bridge.examples.mcp_legacy_server",
     "an HTTP host in front of a stdio server: hosts use http://127.0.0.1:8080/mcp, one child per session"),
    ("reminder-bridge serve --protocol mcp --server-era 2025-11-25 --upstream-command -- harn mcp serve",
     "2026-07-28 hosts in front of a stdio server that speaks only MCP 2025-11-25 (docs/http.md)"),
    ("reminder-bridge serve --rules rules/mcp-remote.toml --admin 127.0.0.1:9464",
     "every route of a rules file, with the admin port (`reminder-bridge status` reads it)"),
]


def add_serve_parser(sub: Any) -> None:
    p = add_command(sub, "serve", "HTTP/SSE/WebSocket proxy: routes from a rules file, or one --upstream", EXAMPLES)
    p.add_argument("--rules", metavar="FILE", help="rules file whose routes have `upstream` (and `path`)")
    p.add_argument("--listen", default="127.0.0.1:8080", type=options.host_port, metavar="HOST:PORT",
                   help="default 127.0.0.1:8080")
    p.add_argument("--admin", type=options.host_port, metavar="HOST:PORT",
                   help="serve /healthz, /readyz, /metrics and the console here")
    p.add_argument("--protocol", choices=("mcp", "a2a", "acp"), help="one-route shortcut: the protocol")
    p.add_argument("--upstream", type=options.upstream_url, metavar="URL",
                   help="one-route shortcut: the upstream (http(s):// or ws(s)://); its path, if any, is where "
                        "hosts post at the proxy too: every path is forwarded unchanged")
    p.add_argument("--upstream-command", action="store_true",
                   help="one-route shortcut: the upstream is the stdio MCP server after `--` (CMD ARGS), started "
                        "at each session's initialize; hosts post to any path (http://HOST:PORT/mcp)")
    p.add_argument("--upstream-command-mode", choices=("session", "shared"), default=None,
                   help="with --upstream-command: one child per MCP session (default), or one child all sessions "
                        "share, request ids rewritten per session")
    p.add_argument("--header", action="append", type=options.header, metavar="'NAME: VALUE'", default=[],
                   help="set a header on every upstream request of every route, in place of the client's (repeat "
                        "for more); ${VAR} in VALUE is read from this environment")
    p.add_argument("--host-dialect", choices=HOST_DIALECTS,
                   help="claude-channel: the hosts are Claude Code sessions launched with channels (MCP routes only)")
    p.add_argument("--peer-dialect", choices=("auto", "standard", "legacy", "none"))
    options.add_era_flags(p)
    p.add_argument("--upstream-timeout", type=options.seconds, default=300.0, metavar="SECONDS",
                   help="seconds to wait for an upstream to start answering (default 300)")
    p.add_argument("--allowed-origin", action="append", type=options.origin, metavar="ORIGIN",
                   help="a browser origin every route accepts (repeat for more; `*` for any, `loopback` for "
                        "localhost); default: the rules' allowed_origins, else loopback origins only")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
                   help="log lines on stderr: warning (default) logs every reminder dropped, refused or limited "
                        "and why; info logs every decision")
    p.add_argument("--workers", type=options.checked(_workers), default=1, metavar="N",
                   help="N processes on one port (SO_REUSEPORT), each a full proxy; more than one needs shared "
                        "state (--state, or [state] url in the rules file)")
    for key, (flag, kind, text) in LIMIT_FLAGS.items():
        p.add_argument(flag, dest=key, type=options.model_value(Limits, key, kind), metavar="N", help=text)
    # (not `command`: that is the subcommand's own name in the namespace, `serve`)
    p.add_argument("child", nargs=argparse.REMAINDER, metavar="command",
                   help="with --upstream-command: -- CMD [ARG...]")
    p.set_defaults(func=_cmd_serve, reloads=True)  # SIGHUP reloads the rules (bridge/cli/hangup.py)


def _workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise ValueError(f"must be a number from 1 to 64 (got {text})")
    return int(text)


def build_limits(args: Any, rules: Rules | None) -> Limits:
    base = rules.limits if rules is not None else Limits()
    given = {key: getattr(args, key) for key in LIMIT_FLAGS if getattr(args, key, None) is not None}
    return Limits.model_validate({**base.model_dump(), **given}) if given else base


def with_flags(args: Any, route: RouteSettings) -> RouteSettings:
    """A route's settings with what the command line overrides (`--allowed-origin`, `--header`): at
    start-up, and again at every reload, which would otherwise drop them. Both were checked when
    they were parsed."""
    update: dict[str, Any] = {}
    route = options.with_eras(args, route)
    if origins := getattr(args, "allowed_origin", None):
        update["allowed_origins"] = origins
    if headers := getattr(args, "header", None):
        given = {name.lower() for name, _ in headers}
        update["headers"] = {**{k: v for k, v in route.headers.items() if k.lower() not in given}, **dict(headers)}
    return route.model_copy(update=update) if update else route


def build_routes(args: Any, rules: Rules | None, tracing: Tracing | None = None,
                 limits: Limits | None = None, shared: Any = None) -> list[HttpRoute]:
    """The routes to serve; ``shared``: the state backend every route's policy and flows use
    (None: this process's memory)."""
    from bridge.policy import Policy
    from bridge.transports.http.routes import HttpRoute

    dialects = {"host_dialect": args.host_dialect, "peer_dialect": args.peer_dialect}
    log_level = getattr(args, "log_level", "warning")
    limits = limits or Limits()

    def check_dialect(name: str, protocol: str) -> None:
        problem = host_dialect_problem(args.host_dialect, protocol)
        if problem is not None:
            raise ValueError(f"--host-dialect: {problem} (route {name})")

    def check_eras(name: str, route: RouteSettings) -> RouteSettings:
        era = route.bridged_server_era
        command = bool(route.command) and not route.upstream  # a stdio server behind serve
        if era and command and route.command_mode == "shared":
            raise ValueError(f"route {name}: the era bridge in front of a stdio `command` keeps one child per "
                             "2025-11-25 session; `command_mode = \"shared\"` is not bridged (issue 21)")
        if era and not command and not (route.upstream or "").startswith(("http://", "https://")):
            raise ValueError(f"route {name}: serve bridges a {era} server at an http(s) upstream or a stdio "
                             "`command`, not a WebSocket (issue 21)")
        return route

    command = args.child[1:] if args.child[:1] == ["--"] else list(args.child)
    if command and not args.upstream_command:
        raise ValueError(f"unexpected arguments {' '.join(command)!r}: a stdio server follows --upstream-command --")
    if rules is not None:
        if args.upstream_command:
            raise ValueError("--upstream-command is the one-route shortcut; with --rules, give the route "
                             "`command` and `path` instead")
        for name, r in rules.routes.items():
            if served_by_serve(r):
                check_dialect(name, r.protocol)
        served = {name: check_eras(name, with_flags(args, r))
                  for name, r in rules.routes.items() if served_by_serve(r)}
        routes = [HttpRoute(name, r.protocol, r.path or "", r.upstream or stdio_upstream(r.command, r.cwd), r, dialects,
                            Policy(r, rules.global_budget, route=name, shared=shared), tracing, log_level, limits)
                  for name, r in served.items()]
        if not routes:
            raise ValueError(f"{args.rules}: no route has an `upstream` (or a `command` and a `path`) to serve")
        return routes
    if args.upstream_command:
        if args.upstream or not command:
            raise ValueError("--upstream-command runs the stdio server after `--` in place of --upstream: "
                             "serve --protocol mcp --upstream-command -- CMD ARGS")
        if (args.protocol or "mcp") != "mcp":
            raise ValueError("--upstream-command serves a stdio MCP server (--protocol mcp)")
        mode = args.upstream_command_mode or "session"
        settings = check_eras(UNNAMED_ROUTE, with_flags(args, RouteSettings(command=command, command_mode=mode)))
        check_dialect(UNNAMED_ROUTE, "mcp")
        return [HttpRoute(UNNAMED_ROUTE, "mcp", "", stdio_upstream(command), settings, dialects,
                          Policy(settings, route=UNNAMED_ROUTE, shared=shared), tracing, log_level, limits)]
    if args.upstream_command_mode:
        raise ValueError("--upstream-command-mode goes with --upstream-command")
    if not (args.protocol and args.upstream):
        raise ValueError("give --rules FILE, or --protocol and --upstream (or --upstream-command -- CMD) for one route")
    # --upstream was checked when parsed
    settings = check_eras(UNNAMED_ROUTE, with_flags(args, RouteSettings(upstream=args.upstream)))
    check_dialect(UNNAMED_ROUTE, args.protocol)
    if args.protocol == "acp" and not args.upstream.startswith(("ws://", "wss://")):
        raise ValueError("ACP has no HTTP transport: give --protocol acp a ws:// or wss:// --upstream, or run the "
                         "agent with `reminder-bridge stdio`")
    return [HttpRoute(UNNAMED_ROUTE, args.protocol, "", args.upstream, settings, dialects,
                      Policy(settings, route=UNNAMED_ROUTE, shared=shared), tracing, log_level, limits)]


def served_by_serve(route: RouteSettings) -> bool:
    """A route `serve` answers: one with an `upstream`, or an MCP one with a `command` and a `path`
    (its stdio server runs behind it; a `command` alone is `reminder-bridge stdio`'s)."""
    return bool(route.upstream) or bool(route.command and route.path is not None and route.protocol == "mcp")


def stdio_upstream(command: list[str] | None, cwd: str | None = None) -> str:
    """How a route's stdio server is shown where an upstream URL would be (its program, not its
    arguments, which may hold secrets). A program that cannot be found is refused now, not at the
    first host's initialize."""
    import shutil

    program = (command or ["?"])[0]
    if cwd is None and shutil.which(program) is None:
        raise ValueError(f"cannot start {program!r}: no such program (on PATH, or as a path)")
    return "stdio:" + os.path.basename(program)


def _cmd_serve(args: Any) -> int:
    from bridge.admin import split_hostport
    from bridge.cli import workers
    from bridge.loop import run as run_loop
    from bridge.policy.reload import RulesFile
    from bridge.rules import RulesError, load_rules
    from bridge.telemetry import Tracing

    rules = None
    try:
        rules = load_rules(args.rules) if args.rules else None
        tracing = Tracing.from_settings(rules.telemetry) if rules is not None else Tracing()
    except (RulesError, RuntimeError) as exc:
        sys.stderr.write(f"reminder-bridge serve: {exc}\n")
        return 2
    from bridge.cli.shared_state import open_shared, state_settings

    host, port = split_hostport(args.listen)
    worker = workers.worker_of()
    supervising = args.workers > 1 and worker is None
    stop_logging = configure_logging(args.log_format, threaded=not supervising)  # a supervisor forks: no thread
    try:
        limits = build_limits(args, rules)
        state = state_settings(getattr(args, "state", None), rules)
        # the supervisor only checks the routes; each worker opens its own connection to the shared state
        shared = None if supervising else \
            open_shared(state, lambda event, **fields: proxy.routes[0].recorder.log(event, **fields))
        routes = build_routes(args, rules, tracing, limits, shared)
    except (ValueError, RuntimeError) as exc:  # RuntimeError: a Redis URL without the redis client installed
        sys.stderr.write(f"reminder-bridge serve: {exc}\n")
        return 2
    if args.workers > 1 and any(route.settings.command and not route.settings.upstream for route in routes):
        sys.stderr.write(f"reminder-bridge serve: --workers {args.workers}: a stdio server's sessions live in the "
                         "process that runs it (its children and their state are not shared), so a host's next "
                         "request on another worker would find no session; run one worker\n")
        return 2
    if args.workers > 1 and any(route.settings.bridged_server_era == "2026-07-28" for route in routes):
        sys.stderr.write(f"reminder-bridge serve: --workers {args.workers}: a 2025-11-25 host's session bridged to a "
                         "2026-07-28 server lives in the process that issued it, so a host's next request on another "
                         "worker would find no session; run one worker\n")
        return 2
    if supervising:
        tracing.shutdown()
        problem = workers.refusal(state, args.workers)
        if problem:
            sys.stderr.write(f"reminder-bridge serve: {problem}\n")
            return 2
        return workers.supervise(args.argv, args.workers, host, port)
    from bridge.transports.http.server import HttpProxy

    proxy = HttpProxy(routes, args.upstream_timeout, limits)
    admin, token = args.admin, os.environ.get("REMINDER_BRIDGE_ADMIN_TOKEN", "")
    if rules is not None:
        if admin is None and "admin" in rules.model_fields_set:
            admin = rules.admin.listen
        token = rules.admin.token or token
    names = [route.name for route in proxy.routes]
    rules_file = RulesFile(args.rules, lambda new: {n: with_flags(args, new.routes[n]) for n in names
                                                    if n in new.routes}) if args.rules else None
    try:
        return run_loop(_run(proxy, host, worker.port if worker else port, admin, token=token, rules_file=rules_file,
                             admin_settings=rules.admin if rules is not None else None, shared=shared,
                             worker=worker))
    finally:
        tracing.shutdown()
        stop_logging()


def served_url(route: HttpRoute, host: str, port: int) -> str:
    """Where hosts reach ``route`` at the proxy: its `path`, or (a route without one serves every
    path unchanged) the path its upstream URL names."""
    scheme = "ws" if route.is_websocket else "http"
    path = route.prefix if route.target.path or route.prefix else route.target.endpoint
    if route.stdio is not None:  # a stdio server answers every path of its route: /mcp, as hosts expect
        path = route.prefix or "/mcp"
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}{path or '/'}"


#: Seconds a SIGTERM waits for requests and streams in flight before cutting them off.
SHUTDOWN_GRACE = 10.0


async def _run(proxy: HttpProxy, host: str, port: int, admin: str | None, *, token: str = "",
               rules_file: RulesFile | None = None, admin_settings: Any = None,
               started: Callable[[int], None] | None = None, shared: Any = None,
               worker: workers.Worker | None = None) -> int:
    """Serve until SIGTERM/SIGINT. As one of `--workers N` (``worker``), listen with SO_REUSEPORT,
    serve the admin port only in the first worker, and tell the supervisor, not stderr, when listening."""
    import asyncio

    from aiohttp import web

    from bridge.admin import AdminError
    from bridge.cli.reloading import watch_rules
    from bridge.loop import loop_name
    from bridge.transports.guard import guarded_site

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()  # SIGTERM / SIGINT: stop listening, let requests in flight finish, then exit
    if worker is not None:  # a worker never outlives its supervisor, however the supervisor ended
        def orphaned() -> None:
            proxy.routes[0].recorder.log("supervisor_gone", level="warning",
                                         why="the supervisor of --workers ended; this worker stops too")
            stop.set()

        worker.watch_supervisor(loop, orphaned)
    proxy.guard.install(loop)
    runner = web.AppRunner(proxy.app, access_log=None, handler_cancellation=True, shutdown_timeout=SHUTDOWN_GRACE,
                           keepalive_timeout=proxy.limits.idle_timeout_s)
    await runner.setup()
    try:
        await guarded_site(runner, host, port, proxy.guard, reuse_port=worker is not None).start()
    except OSError as exc:
        await runner.cleanup()
        sys.stderr.write(f"reminder-bridge serve: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        return 2
    if shared is not None:
        await shared.check()  # Redis away, full or refusing: logged now, served per on_unavailable, retried
    admin_runner = None
    if admin and (worker is None or worker.index == 0):
        from bridge.admin import start_admin

        try:
            admin_runner = await start_admin(admin, proxy.routes[0].recorder, ready=lambda: True, token=token,
                                             settings=admin_settings,
                                             degraded=degraded(shared))
        except AdminError as exc:
            await runner.cleanup()
            sys.stderr.write(f"reminder-bridge serve: {exc}\n")
            return 2
    # every handler is in place before the `listening` line: whoever waits for it may signal at once
    stop_watching = watch_rules(rules_file, proxy.routes)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0][1] if runner.addresses else port
    listening = {"event": "listening", "listen": f"{host}:{bound}", "max_connections": proxy.guard.max_connections,
                 "loop": loop_name(), "routes": [{"name": r.name, "prefix": r.prefix or "/", "url": served_url(r, host, bound),
                                                  "upstream": r.target.shown, "protocol": r.protocol}
                                                 for r in proxy.routes]}
    if worker is not None:
        worker.ready(json.dumps(listening) + "\n")
    else:
        announce(listening)
    if started:
        started(bound)
    try:
        await stop.wait()
    finally:
        stop_watching()
        if admin_runner:
            await admin_runner.cleanup()
        await runner.cleanup()
        if shared is not None:
            await shared.close()
    return 0
