"""Command line: `reminder-bridge translate | check | demo | stdio | serve | status`.

Each command's code is in its own module here (`translate`, `stdio`, `serve`); transports and
pipelines know nothing of the command line.
"""
from __future__ import annotations

from bridge.cli import hangup

hangup.hold()  # first of all: a SIGHUP while the imports below run must not end the process

import argparse  # noqa: E402 - after hold(), on purpose
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

PROTOCOLS = ("mcp", "acp", "a2a")
DIALECTS = ("auto", "standard", "legacy", "none")
#: what `bridge.logs.configure` writes (named here: the parser is built before logging is imported)
LOG_FORMATS = ("text", "json")


def _cmd_check(args: argparse.Namespace) -> int:
    from bridge.rules import check_files

    problems = check_files(args.files)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"ok: {len(args.files)} file(s), no problems")
    return 1 if problems else 0


def _width(text: str) -> int:
    from bridge.demo import SMALLEST_WIDTH

    if not text.isdigit() or int(text) < SMALLEST_WIDTH:
        raise ValueError(f"must be a number of columns, at least {SMALLEST_WIDTH} (got {text})")
    return int(text)


def _cmd_demo(args: argparse.Namespace) -> int:
    from bridge.demo import run_demo

    return run_demo(width=args.width)


#: optional extras: (name as `--version` reports it, a module it installs)
EXTRAS = (("uvloop", "uvloop"), ("msgspec", "msgspec"), ("redis", "redis"),
          ("otlp", "opentelemetry.exporter.otlp.proto.http"))


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def version_text() -> str:
    """What `--version` prints: the version, Python, the event loop `stdio`/`serve` use, the extras found."""
    import platform
    from importlib.metadata import PackageNotFoundError, version  # ~20 ms: only for --version

    from bridge.loop import loop_name

    try:
        mine = version("reminder-bridge")
    except PackageNotFoundError:  # run from a source tree that was never installed
        mine = "unknown (not installed)"
    found = [name for name, module in EXTRAS if installed(module)]
    return (f"reminder-bridge {mine}\n"
            f"python {platform.python_version()} ({platform.python_implementation()}, {sys.platform})\n"
            f"event loop: {loop_name('serve')} (serve), {loop_name('stdio')} (stdio)\n"
            f"optional extras found: {', '.join(found) or 'none'}")


class _Version(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: object):
        super().__init__(option_strings, dest, nargs=0, help="print version, Python, event loop and extras found")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_text())
        parser.exit()


EXAMPLES = """examples:
  reminder-bridge demo
      watch a standard host talk to legacy (harn) peers through the proxy
  reminder-bridge stdio -- python -m bridge.examples.mcp_legacy_server
      wrap an MCP server (or ACP agent) that a host launches
  reminder-bridge serve --protocol mcp --upstream http://127.0.0.1:3000/mcp
      put the proxy in front of an MCP server over HTTP: hosts use http://127.0.0.1:8080/mcp
  reminder-bridge check rules/*.toml
      validate rules files

`reminder-bridge COMMAND --help` has the options and examples of each command."""


def _add_check(sub: Any) -> None:
    from bridge.cli.options import add_command

    p = add_command(sub, "check", "validate rules files; prints FILE:LINE: KEY: MESSAGE per problem", [
        ("reminder-bridge check rules/default.toml rules/examples/*.toml", "check every shipped rules file"),
        ("GITHUB_TOKEN=… reminder-bridge check rules/mcp-remote.toml",
         "a file whose headers read ${GITHUB_TOKEN} needs it set, as serve does"),
    ])
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=_cmd_check)


def _add_demo(sub: Any) -> None:
    from bridge.cli.options import add_command, checked

    p = add_command(sub, "demo", "a standard host talking to bundled legacy (harn) peers through the proxy", [
        ("reminder-bridge demo", "every protocol, at the terminal's width"),
        ("reminder-bridge demo --width 160 | less -R", "wider, in a pager"),
    ])
    p.add_argument("--width", type=checked(_width), default=0, metavar="COLUMNS",
                   help="columns to lay the messages out in (default: the terminal's, at least 100)")
    p.set_defaults(func=_cmd_demo)


def _add_translate(sub: Any) -> None:
    from bridge.cli.translate import add_translate_parser

    add_translate_parser(sub, PROTOCOLS, DIALECTS)


def _add_stdio(sub: Any) -> None:
    from bridge.cli.stdio import add_stdio_parser

    add_stdio_parser(sub)
    _add_running_options(sub.choices["stdio"])


def _add_serve(sub: Any) -> None:
    from bridge.cli.serve import add_serve_parser

    add_serve_parser(sub)
    _add_running_options(sub.choices["serve"])


def _add_status(sub: Any) -> None:
    from bridge.console.cli import add_status_parser

    add_status_parser(sub)


def _add_running_options(p: argparse.ArgumentParser) -> None:
    """What `stdio` and `serve` share: where state lives, the log format."""
    from bridge.cli import options

    p.add_argument(
        "--state-dir", metavar="DIR", help="where durable state lives (the outbox store); default: "
        "$REMINDER_BRIDGE_STATE_DIR, else $XDG_STATE_HOME/reminder-bridge, else ~/.local/state/reminder-bridge")
    p.add_argument(
        "--log-format", choices=LOG_FORMATS, help="text: plain lines for a person (the default when stderr is a "
        "terminal); json: one JSON object per line (the default otherwise)")
    p.add_argument(
        "--state", metavar="URL", type=options.state_url, help="where budgets, queued reminders and session "
        "records live, shared with every proxy using the same URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], "
        "rediss://..., unix:///PATH; default: the rules file's [state] url, else this process (memory)")


#: each command's parser, in the order `--help` lists them
COMMANDS: dict[str, Callable[[Any], None]] = {
    "translate": _add_translate, "check": _add_check, "demo": _add_demo, "stdio": _add_stdio, "serve": _add_serve,
    "status": _add_status,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command``, that command's alone (what `main` builds for a
    line that names one): each command's module imports what its options need, and `stdio` must
    not wait for `serve`'s (the rules schema, pydantic) before it starts its child."""
    parser = argparse.ArgumentParser(
        prog="reminder-bridge",
        description="Transparent sidecar that rewrites ambient reminders between legacy (harn) and standard "
                    "MCP, ACP and A2A messages.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in COMMANDS.items():
        if command is None or name == command:
            add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:
        print(version_text())  # without building the parser, whose options import the rules schema (pydantic)
        return 0
    given = sys.argv[1:] if argv is None else argv
    args = build_parser(given[0] if given and given[0] in COMMANDS else None).parse_args(argv)
    if not getattr(args, "reloads", False):  # only `stdio` and `serve` reload on SIGHUP (see `hangup`)
        hangup.release()
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `serve --workers` starts each worker with it
    if getattr(args, "state_dir", None):  # read by bridge/outbox/store.py, so no transport needs to know
        os.environ["REMINDER_BRIDGE_STATE_DIR"] = os.path.abspath(args.state_dir)
    return int(args.func(args) or 0)

