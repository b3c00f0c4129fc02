"""What every command's options share: no abbreviations (`--header` is never read as
`--header-timeout`), examples in each help text, and argparse types that turn a bad value into the
one line argparse prints under its usage block, naming the option (`argument --upstream: …`).

A type checks the value as the rules file would (the same functions), so a flag and its rules key
never disagree about what is valid. The rules schema is imported when a value is checked, not when
the parser is built: it is pydantic, most of the start-up, and `stdio -- CMD` starts its child
before it (docs/performance.md, cold start).
"""
from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from bridge.dialects.eras import ERAS
from bridge.environ import parse_assignment, parse_header

if TYPE_CHECKING:
    from pydantic import BaseModel

    from bridge.rules import RouteSettings

T = TypeVar("T")


def add_command(sub: Any, name: str, help: str, examples: list[tuple[str, str]],
                description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand whose `--help` ends with ``examples`` ((command, what it does) pairs)."""
    lines = ["examples:"]
    for command, what in examples:
        lines += [f"  {command}", f"      {what}"]
    return sub.add_parser(name, help=help, description=description or help, epilog="\n".join(lines),
                          formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)


def checked(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a checking function: its ValueError's words become argparse's one line
    (argparse would otherwise print only "invalid value")."""
    def parse(text: str) -> T:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = getattr(check, "__name__", "value")
    return parse


def _directory(text: str) -> str:
    path = Path(text).expanduser()
    if not path.is_dir():
        raise ValueError(f"{text!r} is not a directory")
    return str(path.resolve())


def _host_port(text: str) -> str:
    from bridge.rules import check_hostport

    return check_hostport(text)


def _upstream_url(text: str) -> str:
    from bridge.rules import UPSTREAM_SCHEMES, check_url

    return check_url(text, UPSTREAM_SCHEMES)


def _origin(text: str) -> str:
    from bridge.rules import check_origins

    return check_origins([text])[0]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise ValueError(f"must be a number of seconds > 0 (got {text})")
    return value


def _state_url(text: str) -> str:
    from bridge.state.settings import check_state_url

    return check_state_url(text)


host_port = checked(_host_port)
upstream_url = checked(_upstream_url)
origin = checked(_origin)
state_url = checked(_state_url)
seconds = checked(_seconds)
directory = checked(_directory)
#: `--header 'Name: value'` and `--env NAME=VALUE`, `${NAME}` read from this process's environment
header = checked(lambda text: parse_header(text, os.environ))
assignment = checked(lambda text: parse_assignment(text, os.environ))


def model_value(model: type[BaseModel], key: str, kind: type) -> Callable[[str], Any]:
    """An argparse type for a flag that overrides ``model``'s ``key``: the same bounds as the rules
    key, in the same words (`must be an integer >= 0 (got -1)`)."""
    from pydantic import TypeAdapter, ValidationError

    from bridge.problems import describe_key

    field = model.model_fields[key]
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[field.annotation, *field.metadata])

    def parse(text: str) -> Any:
        try:
            return adapter.validate_python(kind(text))
        except (ValueError, ValidationError):  # ValidationError is a ValueError; kind() raises the plain one
            raise argparse.ArgumentTypeError(f"must be {describe_key(model, key)} (got {text})") from None

    parse.__name__ = kind.__name__
    return parse


def add_era_flags(p: argparse.ArgumentParser) -> None:
    """`--host-era` / `--server-era` (issue 21), over the route's `host_era` / `server_era`."""
    p.add_argument("--host-era", choices=ERAS, help="the MCP revision the host speaks (default: the route's "
                   "host_era, else auto: as it comes); e.g. --host-era 2026-07-28 --server-era 2025-11-25 bridges a "
                   "2026-07-28 host to a server that speaks only 2025-11-25, and the other way round")
    p.add_argument("--server-era", choices=ERAS, help="the MCP revision the server speaks (default: the route's "
                   "server_era, else auto)")
    p.add_argument("--input-wait", dest="input_wait_s", type=seconds, metavar="SECONDS",
                   help="across an era bridge: seconds the host has to answer a server's sampling, elicitation or "
                   "roots request before the bridge gives it up (default: the route's input_wait_s, else 300)")


def with_eras(args: argparse.Namespace, settings: RouteSettings) -> RouteSettings:
    """``settings`` with `--host-era` / `--server-era` over its keys; ValueError for a route of
    another protocol than MCP."""
    update = {key: getattr(args, key) for key in ("host_era", "server_era", "input_wait_s") if getattr(args, key, None)}
    if not update:
        return settings
    from bridge.defaults import RouteDefaults

    # the built-in defaults stay plain (no rules schema on the way to stdio's first answer)
    out = settings.replace(**update) if isinstance(settings, RouteDefaults) else settings.model_copy(update=update)
    if out.protocol not in (None, "mcp") and (out.host_era, out.server_era) != ("auto", "auto"):
        raise ValueError(f"--host-era and --server-era name MCP revisions; this route's protocol is {out.protocol}")
    return out
