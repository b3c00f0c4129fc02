"""Command line: `reminder-bridge translate | check | demo | stdio`."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from bridge.pipeline import HOST, Flow, Send
from bridge.rules import RouteSettings, check_files
from bridge.telemetry import Recorder

PROTOCOLS = ("mcp", "acp", "a2a")
DIALECTS = ("auto", "standard", "legacy", "none")


def make_flow(protocol: str, settings: RouteSettings | None = None, recorder: Recorder | None = None,
              **kwargs: Any) -> Flow:
    """The pipeline for one connection of ``protocol``."""
    from bridge.pipeline.a2a import A2AFlow
    from bridge.pipeline.acp import AcpFlow
    from bridge.pipeline.mcp import McpFlow

    flows: dict[str, type[Flow]] = {"mcp": McpFlow, "acp": AcpFlow, "a2a": A2AFlow}
    return flows[protocol](settings, recorder, **kwargs)


def translate(protocol: str, toward: str, source: str, target: str, data: bytes,
              recorder: Recorder | None = None) -> list[Send]:
    """One stateless conversion, as the shared vectors describe it."""
    host, peer = (target, source) if toward == HOST else (source, target)
    extra: dict[str, Any] = {"peer_declared": True} if protocol == "mcp" else {}
    from bridge.policy import Policy

    flow = make_flow(protocol, RouteSettings(), recorder, host_dialect=host, peer_dialect=peer,
                     policy=Policy(enabled=False), **extra)  # a conversion, not a route: no trust limits or budgets
    frame = data.strip()
    if protocol == "a2a" and _is_card(frame):
        import json

        from bridge.pipeline import dumps

        rewritten = flow.rewrite_card(json.loads(frame))  # type: ignore[attr-defined]
        return [Send(HOST, dumps(rewritten) if rewritten is not None else frame)]
    return flow.from_peer(frame) if toward == HOST else flow.from_host(frame)


def _is_card(frame: bytes) -> bool:
    return b'"jsonrpc"' not in frame and b"supportedInterfaces" in frame


def _cmd_translate(args: argparse.Namespace) -> int:
    data = sys.stdin.buffer.read()
    sends = translate(args.protocol, args.toward, args.source, args.target, data)
    out = sys.stdout.buffer
    for send in sends:
        message = send.data
        if b"\n" in message:  # a pretty-printed input that passes unchanged: keep one line per message
            import json

            from bridge.pipeline import dumps

            message = dumps(json.loads(message))
        out.write(b'{"to":"' + send.to.encode() + b'","message":' + message + b"}\n")
    out.flush()
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    problems = check_files(args.files)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"ok: {len(args.files)} file(s), no problems")
    return 1 if problems else 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from bridge.demo import run_demo

    return run_demo(width=args.width)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reminder-bridge",
        description="Transparent sidecar that rewrites ambient reminders between legacy (harn) and standard "
                    "MCP, ACP and A2A messages.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("translate", help="convert one message read on stdin; prints {to, message} JSON lines")
    p.add_argument("--protocol", choices=PROTOCOLS, required=True)
    p.add_argument("--toward", choices=("host", "peer"), required=True, help="direction the message travels")
    p.add_argument("--source", choices=DIALECTS[1:], required=True, help="dialect of the side that sent it")
    p.add_argument("--target", choices=DIALECTS[1:], required=True, help="dialect of the side it goes to")
    p.set_defaults(func=_cmd_translate)

    p = sub.add_parser("check", help="validate rules files; prints FILE:LINE: KEY: MESSAGE per problem")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("demo", help="a standard host talking to bundled legacy peers through the proxy")
    p.add_argument("--width", type=int, default=0, help="columns for the side-by-side view (default: terminal)")
    p.set_defaults(func=_cmd_demo)

    from bridge.transports.serve import add_serve_parser
    from bridge.transports.stdio import add_stdio_parser

    add_stdio_parser(sub)
    add_serve_parser(sub)
    sub.choices["stdio"].add_argument(
        "--state-dir", metavar="DIR", help="where durable state lives (the outbox store); default: "
        "$REMINDER_BRIDGE_STATE_DIR, else $XDG_STATE_HOME/reminder-bridge, else ~/.local/state/reminder-bridge")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "state_dir", None):  # read by bridge/outbox/store.py, so no transport needs to know
        os.environ["REMINDER_BRIDGE_STATE_DIR"] = os.path.abspath(args.state_dir)
    return int(args.func(args) or 0)
