"""`reminder-bridge translate`: one stateless conversion, as the shared conversion vectors describe it."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from bridge.dialects.hosts import HOST_ADAPTERS, host_dialect_problem
from bridge.jsonrpc import dumps
from bridge.logs import configure as configure_logging
from bridge.pipeline.commands import HOST, Send, writes
from bridge.rules import RouteSettings

if TYPE_CHECKING:  # the pipeline is imported when a message is translated, not for every command line
    from bridge.telemetry import Recorder


def add_translate_parser(sub: Any, protocols: tuple[str, ...], dialects: tuple[str, ...]) -> None:
    from bridge.cli.options import add_command

    p = add_command(sub, "translate", "convert one message read on stdin; prints {to, message} JSON lines", [
        ("reminder-bridge translate --protocol mcp --toward host --source legacy --target standard < message.json",
         "a legacy MCP reminder (notifications/message with _meta.harn.reminder) as a standard host gets it"),
        ("reminder-bridge translate --protocol acp --toward peer --source standard --target legacy < inject.json",
         "a standard session/inject_reminder as a Harn agent gets it (session/remind)"),
    ])
    p.add_argument("--protocol", choices=protocols, required=True)
    p.add_argument("--toward", choices=("host", "peer"), required=True, help="direction the message travels")
    p.add_argument("--source", choices=dialects[1:], required=True, help="dialect of the side that sent it")
    p.add_argument("--target", choices=dialects[1:] + tuple(HOST_ADAPTERS), required=True,
                   help="dialect of the side it goes to (claude-channel: an MCP host, --toward host)")
    p.set_defaults(func=_cmd_translate)


def translate(protocol: str, toward: str, source: str, target: str, data: bytes,
              recorder: Recorder | None = None) -> list[Any]:
    """What the proxy writes for one message: every command that puts bytes on a wire, in order."""
    from bridge.assembly import make_flow
    from bridge.pipeline.waiting import at_once
    from bridge.policy import Policy
    from bridge.telemetry import Recorder

    host, peer = (target, source) if toward == HOST else (source, target)
    extra: dict[str, Any] = {"peer_declared": True} if protocol == "mcp" else {}
    recorder = recorder or Recorder(metrics=False)  # one conversion: no metric could be read
    flow = make_flow(protocol, RouteSettings(), recorder, host_dialect=host, peer_dialect=peer,
                     policy=Policy(enabled=False), **extra)  # a conversion, not a route: no trust limits or budgets
    frame = data.strip()
    if protocol == "a2a" and _is_card(frame):
        rewritten = flow.rewrite_card(json.loads(frame))  # type: ignore[attr-defined]
        return [Send(HOST, dumps(rewritten) if rewritten is not None else frame)]
    return writes(at_once(flow.from_peer(frame) if toward == HOST else flow.from_host(frame)))


def translate_lines(protocol: str, toward: str, source: str, target: str, data: bytes,
                    recorder: Recorder | None = None) -> bytes:
    """What `translate` prints for one message: one `{"to": …, "message": …}` line per message the
    proxy writes, nothing for a drop (tests/vectors' runner calls it in-process)."""
    lines = []
    for command in translate(protocol, toward, source, target, data, recorder):
        message = command.data
        if b"\n" in message:  # a pretty-printed input that passes unchanged: keep one line per message
            message = dumps(json.loads(message))
        lines.append(b'{"to":"' + command.to.encode() + b'","message":' + message + b"}\n")
    return b"".join(lines)


def _is_card(frame: bytes) -> bool:
    return b'"jsonrpc"' not in frame and b"supportedInterfaces" in frame


def target_problem(protocol: str, toward: str, target: str) -> str | None:
    """Why `translate` refuses ``--target`` with the other options, or None."""
    problem = host_dialect_problem(target, protocol)
    if problem is None and target in HOST_ADAPTERS and toward != HOST:
        problem = f'"{target}" is a host dialect: it only translates --toward host'
    return problem


def _cmd_translate(args: argparse.Namespace) -> int:
    if (problem := target_problem(args.protocol, args.toward, args.target)) is not None:
        sys.stderr.write(f"reminder-bridge translate: --target {problem}\n")
        return 2
    configure_logging("json", threaded=False)  # a drop is logged on stderr as JSON, as it always was
    sys.stdout.buffer.write(translate_lines(args.protocol, args.toward, args.source, args.target,
                                            sys.stdin.buffer.read()))
    sys.stdout.buffer.flush()
    return 0
