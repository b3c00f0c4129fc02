"""`reminder-bridge stdio -- COMMAND`: wrap an MCP server or ACP agent that a host launches
(the transport is `bridge.transports.stdio`; this is its command line, reload and admin port);
`reminder-bridge stdio --upstream URL`: the same, in front of a remote MCP server over HTTP
(`bridge.transports.remote`)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from bridge.cli import options
from bridge.cli.options import add_command
from bridge.cli.readiness import degraded
from bridge.dialects.hosts import HOST_DIALECTS, host_dialect_problem, protocol_of
from bridge.transports import child
from bridge.transports.remote_kinds import AUTO, TRANSPORTS

if TYPE_CHECKING:
    from bridge.policy.reload import RulesFile
    from bridge.rules import RouteSettings, Rules
    from bridge.transports.stdio import StdioProxy

# Everything with a cost is imported in _cmd_stdio once the child is started, so that the child's
# start-up and these imports overlap: the rules schema (pydantic: most of the start-up), the
# pipeline, telemetry, state and the loop. Only a rules file is read before the child starts (its
# route may name the command; its problems are said before any server starts).


EXAMPLES = [
    ("reminder-bridge stdio -- python -m bridge.examples.mcp_legacy_server",
     "wrap the bundled legacy MCP server; point a host's `command` at this line"),
    ("reminder-bridge stdio --env GITHUB_TOKEN='${GH_TOKEN}' --cwd ~/src -- npx -y @modelcontextprotocol/server-github",
     "the child runs in ~/src with GITHUB_TOKEN set from this shell's $GH_TOKEN (single quotes: ps never shows it)"),
    ("reminder-bridge stdio --rules rules/claude.toml --route workspace",
     "run the route's own `command` (with its `env` and `cwd`) under the route's rules"),
    ("reminder-bridge stdio --host-dialect claude-channel --route workspace -- harn mcp serve --root .",
     "push every reminder into Claude Code as a channel event (docs/hosts.md)"),
    ("reminder-bridge stdio --upstream https://mcp.example/mcp --header 'Authorization: Bearer ${TOKEN}'",
     "a remote MCP server over HTTP (Streamable HTTP, or 2024-11-05 SSE) for a stdio host; the token is read "
     "from $TOKEN (never from argv, never logged)"),
    ("reminder-bridge stdio --upstream https://legacy.example/mcp --server-era 2025-11-25",
     "a 2026-07-28 host in front of a remote server that speaks only MCP 2025-11-25: the proxy speaks it for the "
     "host (docs/rules.md, Era bridging)"),
]


def add_stdio_parser(sub: Any) -> None:
    p = add_command(sub, "stdio", "wrap an MCP server or ACP agent command: reminder-bridge stdio -- CMD ARGS; "
                    "or a remote MCP server: reminder-bridge stdio --upstream URL", EXAMPLES)
    p.add_argument("--rules", metavar="FILE",
                   help="rules file (TOML); default: built-in defaults. Reloaded on SIGHUP and on change")
    p.add_argument("--route", metavar="NAME", help="route name in the rules file; its `command` runs when none "
                   "follows --")
    p.add_argument("--env", action="append", type=options.assignment, metavar="NAME=VALUE", default=[],
                   help="set a variable for the child, on top of this environment and the route's `env` (repeat "
                        "for more); ${VAR} in VALUE is read from this environment")
    p.add_argument("--cwd", type=options.directory, metavar="DIR",
                   help="the child's working directory (default: the route's `cwd`, else this one)")
    p.add_argument("--upstream", type=options.upstream_url, metavar="URL",
                   help="a remote MCP server over HTTP instead of a command: Streamable HTTP (sessions, the GET "
                        "stream, resumption) or the 2024-11-05 HTTP+SSE transport (default: the route's "
                        "`upstream` when it has no `command`)")
    p.add_argument("--header", action="append", type=options.header, metavar="'NAME: VALUE'", default=[],
                   help="with --upstream: a header on every upstream request, on top of the route's `headers` "
                        "(repeat for more); ${VAR} in VALUE is read from this environment. Values are never logged")
    p.add_argument("--upstream-timeout", type=options.seconds, metavar="SECONDS",
                   help="with --upstream: how long a request may take to connect and be answered (a JSON answer "
                        "whole; on an event stream, each next event) before the host gets an error that says so "
                        "(default 300)")
    p.add_argument("--upstream-transport", choices=TRANSPORTS, default=AUTO,
                   help="with --upstream: auto (default) POSTs to the URL and falls back to 2024-11-05 SSE when "
                        "the URL refuses POSTs (a path ending in /sse is taken as SSE at once)")
    p.add_argument("--protocol", choices=("mcp", "acp"), help="default: the route's, else detected from initialize")
    p.add_argument("--host-dialect", choices=HOST_DIALECTS,
                   help="claude-channel: the host is a Claude Code launched with channels (MCP only)")
    p.add_argument("--peer-dialect", choices=("auto", "standard", "legacy", "none"))
    options.add_era_flags(p)
    p.add_argument("--admin", type=options.host_port, metavar="HOST:PORT", help="serve /healthz, /readyz and /metrics here "
                   "(default: the rules file's [admin] listen, if it has an [admin] table)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
                   help="log lines on stderr: warning (default) logs every reminder dropped, refused or "
                        "limited and why; info logs every decision")
    p.add_argument("--max-line", type=int, help=argparse.SUPPRESS)  # default: bridge.transports.stdio.MAX_LINE
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    p.set_defaults(func=_cmd_stdio, reloads=True)  # SIGHUP reloads the rules (bridge/cli/hangup.py)


def _cmd_stdio(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    route: RouteSettings | None = None  # the rules file's route; None: the defaults, built once the child runs
    route_name: str | None = None
    rules: Rules | None = None
    chosen = None
    if args.rules:
        from bridge.rules import RulesError, load_rules

        try:
            rules = load_rules(args.rules)
        except RulesError as exc:
            sys.stderr.write(f"reminder-bridge: {args.rules} has problems:\n{exc}\n")
            return 2
        try:
            route_name, route = select_route(rules, args.route)
        except KeyError as exc:
            sys.stderr.write(f"reminder-bridge: {exc.args[0]}\n")
            return 2
        chosen = route_name if args.route or route_name in rules.routes else None
    command = command or list(route.command or () if route is not None else ())
    url = args.upstream or (route.upstream if route is not None and not command else None)
    problem = _upstream_problem(args, url, command)
    if problem is not None:
        sys.stderr.write(f"reminder-bridge stdio: {problem}\n")
        return 2
    if not command and url is None:
        where = f"route {route_name!r} of {args.rules} has no `command`; " if args.rules else ""
        sys.stderr.write(f"reminder-bridge stdio: no command given: {where}put one after -- "
                         "(reminder-bridge stdio [options] -- CMD ARGS)\n")
        return 2
    dialect = args.host_dialect or (route.host_dialect if route is not None else None)
    # a host adapter belongs to one protocol: it settles a protocol left to detection
    protocol = (args.protocol or (route.protocol if route is not None else None) or protocol_of(dialect)
                or ("mcp" if url is not None else None))
    problem = host_dialect_problem(dialect, protocol)
    if problem is not None:
        sys.stderr.write(f"reminder-bridge stdio: {problem}\n")
        return 2
    started = None
    if url is None:
        try:  # first the child (the host waits for its answer), then what the route needs
            started = child.start(command, env=child_environment(route, args.env),
                                  cwd=args.cwd or (route.cwd if route is not None else None))
        except OSError as exc:
            message, code = child.cannot_start(command, exc)
            sys.stderr.write(message)
            return code
    from bridge.defaults import ROUTE, UNNAMED_ROUTE
    from bridge.logs import configure as configure_logging

    settings = route if route is not None else ROUTE  # no rules file: the defaults, plain (no pydantic)
    route_name = route_name or args.route or UNNAMED_ROUTE
    stop_logging = configure_logging(args.log_format)

    def refuse(message: str) -> int:
        """A setting refused once the child runs: the child is stopped, the host told why."""
        if started is not None:
            child.stop(started)
        stop_logging()
        sys.stderr.write(f"reminder-bridge: {message}\n")
        return 2

    try:
        settings = options.with_eras(args, settings)
    except ValueError as exc:
        return refuse(str(exc))
    if url is not None and settings.bridged_server_era == "2026-07-28" and args.upstream_transport == "sse":
        return refuse("--server-era 2026-07-28: a 2026-07-28 server speaks Streamable HTTP, not the 2024-11-05 "
                      "SSE transport (--upstream-transport)")

    from bridge.loop import run as run_loop
    from bridge.policy import Policy
    from bridge.telemetry import Recorder, Tracing
    from bridge.transports.stdio import MAX_LINE, StdioProxy

    rules_file = None
    if rules is not None:
        from bridge.policy.reload import RulesFile

        rules_file = RulesFile(args.rules, lambda new: _running(new, route_name, chosen))
    try:
        tracing = Tracing.from_settings(rules.telemetry) if rules is not None else Tracing()
    except RuntimeError as exc:  # the otlp exporter without its optional extra
        return refuse(str(exc))
    admin = args.admin
    token = os.environ.get("REMINDER_BRIDGE_ADMIN_TOKEN", "")
    if rules is not None:
        if admin is None and "admin" in rules.model_fields_set:
            admin = rules.admin.listen
        token = rules.admin.token or token
    # without an admin port nothing could read a metric: count none (and never load prometheus_client)
    recorder = Recorder(route=route_name, log_level=args.log_level, tracing=tracing, metrics=bool(admin))
    shared = None
    if args.state is not None or rules is not None:  # else this process's memory: no [state] to read
        from bridge.cli.shared_state import open_shared, state_settings

        try:  # a fleet of sidecars may share one per-server budget
            shared = open_shared(state_settings(args.state, rules), recorder.log)
        except (ValueError, RuntimeError) as exc:
            return refuse(str(exc))
    policy = Policy(settings, rules.global_budget if rules else None, route=route_name, shared=shared)
    if url is not None:
        from bridge.rules import Limits
        from bridge.transports.forwarding import with_own
        from bridge.transports.remote import UPSTREAM_TIMEOUT_S, RemoteProxy

        headers = with_own(settings.headers, dict(args.header))  # --header in place of the route's of its name
        proxy: StdioProxy = RemoteProxy(url, headers, settings, protocol, recorder, args.host_dialect,
                                        args.peer_dialect, args.max_line or MAX_LINE, policy=policy,
                                        transport=args.upstream_transport,
                                        timeout=args.upstream_timeout or UPSTREAM_TIMEOUT_S,
                                        limits=rules.limits if rules is not None else Limits())
    else:
        proxy = StdioProxy(command, settings, protocol, recorder, args.host_dialect, args.peer_dialect,
                           args.max_line or MAX_LINE, policy=policy, started=started)
    try:
        return run_loop(_serve(proxy, admin, token, rules_file, rules.admin if rules is not None else None,
                               shared), "stdio")
    finally:
        tracing.shutdown()
        if proxy.child is None and started is not None:  # refused before the proxy took the child over
            child.stop(started)  # (an --admin that cannot listen)
        stop_logging()


def _upstream_problem(args: argparse.Namespace, url: str | None, command: list[str]) -> str | None:
    """Why the options cannot go together with (or without) an upstream URL, or None."""
    if url is None:
        if args.upstream_timeout is not None:
            return "--upstream-timeout is for --upstream (a child command has no upstream requests)"
        return "--header is for --upstream (a child command gets --env)" if args.header else None
    if command and args.upstream:
        return "give --upstream URL or -- COMMAND, not both"
    if args.env or args.cwd:
        return "--env and --cwd are for a child command; --upstream starts none"
    if not url.startswith(("http://", "https://")):
        return f"--upstream needs an http(s):// URL for stdio (got {url.split(':', 1)[0]}://)"
    if args.protocol == "acp":
        return "--upstream speaks MCP over HTTP; ACP agents are wrapped with -- COMMAND"
    return None


def child_environment(route: RouteSettings | None, flags: list[tuple[str, str]]) -> dict[str, str] | None:
    """The child's environment: this process's, then the route's `env`, then `--env` (None: this
    process's unchanged, as a host that launched us meant it)."""
    env = route.env if route is not None else {}
    if not env and not flags:
        return None
    return {**os.environ, **env, **dict(flags)}


def select_route(rules: Rules, name: str | None) -> tuple[str, RouteSettings]:
    """The route a stdio proxy serves: the one named, else the file's only stdio-capable route."""
    from bridge.rules import UNNAMED_ROUTE

    if name is not None:
        return name, rules.route(name)
    routes = [(n, r) for n, r in rules.routes.items() if r.protocol in (None, "mcp", "acp")]
    if len(routes) == 1:
        return routes[0]
    if not routes:
        return UNNAMED_ROUTE, rules.defaults
    raise KeyError(f"the rules file has several routes; name one with --route ({', '.join(rules.routes)})")


def _running(rules: Rules, name: str, chosen: str | None) -> dict[str, RouteSettings]:
    """The running route's settings in a reloaded file: the route it was started on, or the file's
    defaults when it was started on them (a file without routes)."""
    if chosen is None:
        return {name: rules.defaults} if not rules.routes else {}
    return {name: rules.routes[chosen]} if chosen in rules.routes else {}


async def _serve(proxy: StdioProxy, admin: str | None, token: str, rules_file: RulesFile | None,
                 admin_settings: Any = None, shared: Any = None) -> int:
    from bridge.cli.reloading import watch_rules

    runner = None
    if shared is not None:
        await shared.check()  # never raises: a Redis that refuses starts the proxy degraded
    if admin:  # aiohttp and prometheus_client are imported only for an admin port
        from bridge.admin import AdminError, start_admin

        try:
            runner = await start_admin(admin, proxy.recorder, ready=proxy.ready, token=token,
                                       settings=admin_settings,
                                       degraded=degraded(shared))
        except AdminError as exc:
            sys.stderr.write(f"reminder-bridge stdio: {exc}\n")
            return 2
    stop_watching = watch_rules(rules_file, [proxy])
    try:
        return await proxy.run()
    finally:
        stop_watching()
        if runner is not None:
            await runner.cleanup()
        if shared is not None:
            await shared.close()
