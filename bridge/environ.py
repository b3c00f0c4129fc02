"""Values read from the environment (`${NAME}`), and what may go in an upstream request header or
a child's environment: for the rules keys `headers` and `env` and the flags `--header` and `--env`.

A secret stays out of rules files, shell history and `ps`: write `"Bearer ${GITHUB_TOKEN}"` and the
value is read when the rules (or the command line) are read. Nothing here ever quotes a value in
an error, only names, so a problem report cannot leak a secret.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["check_env_name", "check_header_name", "check_header_value", "expand", "parse_assignment",
           "parse_header"]

#: a variable name, in `${NAME}` and as an `env` key
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: `$${` is a literal `${`; `${…}` a reference; any other `$` is itself
_REFERENCE = re.compile(r"\$\$\{|\$\{(?P<name>[^}]*)(?P<end>\})?")
#: RFC 9110 field-name
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: headers a route cannot set: one hop's own, the proxy's own, or each request's own protocol state
NOT_SETTABLE = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te", "trailer",
    "upgrade", "accept-encoding", "content-type", "accept", "mcp-session-id", "mcp-protocol-version", "mcp-method",
    "mcp-name", "last-event-id",
})


def expand(text: str, environ: Mapping[str, str]) -> str:
    """``text`` with every `${NAME}` replaced by that variable of ``environ``; ValueError names a
    variable that is not set (never a value)."""
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group("name")
        if match.group("end") is None:
            raise ValueError("has a `${` without its `}` (write $${ for a literal ${)")
        if not _NAME.fullmatch(name):
            raise ValueError("a ${…} must hold a variable name: letters, digits and _, not first a digit")
        if name not in environ:
            raise ValueError(f"${{{name}}}: the environment variable {name} is not set")
        return environ[name]

    return _REFERENCE.sub(replace, text)


def check_header_name(name: str) -> str:
    """A header name a route may set on every upstream request; ValueError says why not."""
    if not _TOKEN.fullmatch(name):
        raise ValueError("a header name must be one word of letters, digits and !#$%&'*+-.^_`|~")
    if name.lower() in NOT_SETTABLE:
        raise ValueError(f"{name} is set per request by the host or by the proxy itself; a route cannot set it")
    return name


def check_header_value(value: str) -> str:
    """One line of visible text (tabs allowed): a header value can never start another header."""
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
        raise ValueError("the value has a control character (a line break, say); a header value is one line")
    return value


def check_env_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError("a variable name must be letters, digits and _, not first a digit")
    return name


def parse_header(text: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """`Name: value` (as curl's `-H` takes it), the value's `${NAME}`s read from ``environ``."""
    name, colon, value = text.partition(":")
    if not colon:
        raise ValueError("must be 'Name: value', e.g. 'Authorization: Bearer ${TOKEN}' (there is no ':')")
    return check_header_name(name.strip()), check_header_value(expand(value.strip(), environ))


def parse_assignment(text: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """`NAME=VALUE`, the value's `${NAME}`s read from ``environ``."""
    name, equals, value = text.partition("=")
    if not equals:
        raise ValueError("must be NAME=VALUE, e.g. LOG_LEVEL=debug (there is no '=')")
    value = expand(value, environ)
    if "\0" in value:
        raise ValueError("the value has a NUL character, which no environment can hold")
    return check_env_name(name), value
