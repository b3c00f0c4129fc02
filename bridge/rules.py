"""Rules files (spec §7): the TOML schema, loading, and problems that name file, line and key.

tomllib parses; pydantic validates; tomllib again, one statement at a time, maps every dotted key
back to its line so that `reminder-bridge check` can say `FILE:LINE: KEY: MESSAGE` for every problem at once.
"""
from __future__ import annotations

import os
import re
import string
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator,
)

from bridge.declaration import check_resource, read_manifest
from bridge.defaults import DEFAULT_ENVELOPE, FALLBACK, ROUTE, TRUST, UNNAMED_ROUTE, RouteReading
from bridge.dialects.eras import ERAS
from bridge.dialects.hosts import HOST_DIALECTS, REMINDER_DIALECTS, host_dialect_problem
from bridge.environ import check_env_name, check_header_name, check_header_value, expand
from bridge.fields import RoleHint
from bridge.problems import RuleProblem, RulesError, dotted, line_of, locate_keys, explain, show
from bridge.state.settings import StateSettings
from bridge.urls import LOOPBACK_ORIGINS, redact

__all__ = [
    "Admin", "Budget", "CHANNEL_PLACEHOLDERS", "DEFAULT_ENVELOPE", "ENVELOPE_PLACEHOLDERS", "Fallback", "GlobalBudget",
    "HOST_DIALECTS", "Limits", "Outbox", "Route", "check_origins", "RouteSettings", "RuleProblem",
    "Rules", "RulesError", "ServeOutbox", "Telemetry", "Trust", "UNNAMED_ROUTE", "check_envelope", "check_files",
    "check_hostport", "check_url", "load_rules", "parse_rules_text",
]

Protocol = Literal["mcp", "acp", "a2a"]
Stage = Literal["observe", "dual", "translate", "enforce"]
Dialect = Literal[REMINDER_DIALECTS]  # type: ignore[valid-type]
#: The MCP revision a side of a route speaks (issue 21): `auto` lets the host's era pass through.
Era = Literal[ERAS]  # type: ignore[valid-type]
#: A host side may also speak a host adapter (spec §11, bridge/dialects/hosts.py, the registry).
HostDialect = Literal[HOST_DIALECTS]  # type: ignore[valid-type]

ENVELOPE_PLACEHOLDERS = ("id", "source", "body", "tags", "dedupe_key")
#: `channel_instructions` may name the server the host knows (the route's name, else the server's own).
CHANNEL_PLACEHOLDERS = ("server",)
ROUTE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class _Model(BaseModel):
    # strict: TOML types are already exact, so `burst = 10.0` or `shadow = 1` is a mistake, not a value.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class Fallback(_Model):
    """What to do when one side has no reminder support at all (spec §3-§5). Defaults: bridge/defaults.py."""

    mcp_host_none: Literal["tool_result", "drop"] = FALLBACK.mcp_host_none
    acp_agent_none: Literal["hold", "off"] = FALLBACK.acp_agent_none
    a2a_peer_none: Literal["prepend", "drop"] = FALLBACK.a2a_peer_none


class GlobalBudget(_Model):
    """Token bucket: `rate` tokens per minute, at most `burst` held."""

    rate: Annotated[float, Field(gt=0)] = 60.0
    burst: Annotated[int, Field(ge=1)] = 10


class Budget(GlobalBudget):
    key: Literal["server", "session", "tag"] = "server"
    over: Literal["drop", "coalesce"] = "drop"
    shadow: bool = False
    max_keys: Annotated[int, Field(ge=1)] = 100_000


class Trust(_Model):
    """Limits on untrusted reminder content (spec §7). Defaults: bridge/defaults.py."""

    max_body_bytes: Annotated[int, Field(ge=1)] = TRUST.max_body_bytes
    max_tags: Annotated[int, Field(ge=0)] = TRUST.max_tags
    max_tag_chars: Annotated[int, Field(ge=1)] = TRUST.max_tag_chars
    max_id_bytes: Annotated[int, Field(ge=1)] = TRUST.max_id_bytes
    max_dedupe_key_bytes: Annotated[int, Field(ge=1)] = TRUST.max_dedupe_key_bytes
    #: the whole reminder as the proxy holds and queues it (JSON: every field, `_meta`, unknown fields)
    max_reminder_bytes: Annotated[int, Field(ge=1)] = TRUST.max_reminder_bytes
    max_pending_per_session: Annotated[int, Field(ge=1)] = TRUST.max_pending_per_session
    strip_control: bool = TRUST.strip_control
    role_hint_ceiling: RoleHint | None = TRUST.role_hint_ceiling


def _rules_path(v: str, info: ValidationInfo) -> str:
    """A path from a rules file: `~` expanded, relative to the rules file's folder."""
    path = Path(v).expanduser()
    base = (info.context or {}).get("rules_dir")
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return str(path)


def _from_environ(v: str, info: ValidationInfo) -> str:
    """``v`` with its `${NAME}`s read from the environment (the loader's, else this process's)."""
    return expand(v, (info.context or {}).get("environ", os.environ))


#: `headers` and `env` entries: names checked, values read from the environment (bridge/environ.py)
HeaderName = Annotated[str, AfterValidator(check_header_name)]
HeaderValue = Annotated[str, AfterValidator(_from_environ), AfterValidator(check_header_value)]
EnvName = Annotated[str, AfterValidator(check_env_name)]
EnvValue = Annotated[str, AfterValidator(_from_environ)]


#: What an outbox `identity` may name: `header:<name>`, a header the request carries end to end.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}")
#: Headers that name no one: per hop, per message, or the session a 2026-07-28 request has not.
_NOT_IDENTITIES = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
                             "upgrade", "host", "content-length", "content-type", "accept", "mcp-session-id",
                             "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id"})


def check_identity(value: str) -> str:
    """`header:<name>`, lower-cased: whose outbox a request with no MCP session reads (docs/outbox.md)."""
    kind, _, name = value.partition(":")
    if kind != "header" or not _HEADER_NAME.fullmatch(name):
        raise ValueError(f'must be "header:<name>", naming a request header such as authorization (got {show(value)})')
    if name.lower() in _NOT_IDENTITIES:
        raise ValueError(f"{show(name)} names no one an outbox can belong to (it is per hop, per message, or the "
                         "session such a request has not); name a header the upstream authenticates, such as "
                         "authorization")
    return f"header:{name.lower()}"


class Outbox(_Model):
    """Poll the server's notifications outbox and turn its events into reminders (docs/outbox.md)."""

    resource: str | None = None
    manifest: str | None = None
    max_events: Annotated[int, Field(ge=1, le=1000)] = 100
    max_age_ms: Annotated[int, Field(ge=1)] = 86_400_000
    poll_floor_ms: Annotated[int, Field(ge=100)] = 1000
    poll_ceiling_ms: Annotated[int, Field(ge=100)] = 60_000
    store: str | None = None
    identity: str | None = None

    @field_validator("identity")
    @classmethod
    def _identity(cls, v: str) -> str:
        return check_identity(v)

    @field_validator("resource")
    @classmethod
    def _resource(cls, v: str) -> str:
        return check_resource(v)

    @field_validator("manifest")
    @classmethod
    def _manifest(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("resource") is not None:
            raise ValueError("give resource or manifest, not both")
        path = _rules_path(v, info)
        read_manifest(path)  # refused here, with the reason, rather than at the first poll
        return path

    @field_validator("poll_ceiling_ms")
    @classmethod
    def _ceiling(cls, v: int, info: ValidationInfo) -> int:
        floor = info.data.get("poll_floor_ms")
        if floor is not None and v < floor:
            raise ValueError(f"must be >= poll_floor_ms ({floor}) (got {v})")
        return v

    @field_validator("store")
    @classmethod
    def _store(cls, v: str, info: ValidationInfo) -> str:
        return _rules_path(v, info)


class ServeOutbox(_Model):
    """Expose the reminders the server pushes as an outbox resource of the proxy's own."""

    resource: str
    retention_s: Annotated[int, Field(ge=1)] = 604_800
    store: str | None = None
    identity: str | None = None

    @field_validator("identity")
    @classmethod
    def _identity(cls, v: str) -> str:
        return check_identity(v)

    @field_validator("resource")
    @classmethod
    def _resource(cls, v: str) -> str:
        return check_resource(v)

    @field_validator("store")
    @classmethod
    def _store(cls, v: str, info: ValidationInfo) -> str:
        return _rules_path(v, info)


def check_origins(values: list[str]) -> list[str]:
    """Origins as `allowed_origins` holds them; ValueError names the first one that is not an origin."""
    return [_origin(v) for v in values]


def _origin(v: str) -> str:
    """`*`, `loopback`, or `scheme://host[:port]` exactly as browsers send `Origin` (no path)."""
    if v in ("*", LOOPBACK_ORIGINS):
        return v
    try:
        parts = urlsplit(v)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.path and not parts.query
        parts.port  # raises on a bad port
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f'must be "*", "loopback" or an origin such as "https://app.example:8443" (got {show(v)})')
    return v.lower()


class RouteSettings(_Model, RouteReading):
    """One route's policy. `RouteSettings()` is the built-in behaviour when no rules file is given
    (its defaults, and `identity` and `bridged_server_era`, are in bridge/defaults.py)."""

    protocol: Protocol | None = ROUTE.protocol
    #: `stdio`: the command it runs when none follows `--`, in ``cwd`` with ``env`` on top of the proxy's own
    command: Annotated[list[str], Field(min_length=1)] | None = ROUTE.command
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    cwd: str | None = ROUTE.cwd
    #: `serve`, a route with a `command` and a `path` (no `upstream`): one child per MCP session, or
    #: one child every session shares (ids rewritten per session)
    command_mode: Literal["session", "shared"] = ROUTE.command_mode
    #: `serve`: where the route answers at the proxy (absent: every path, as the upstream has it)
    path: str | None = ROUTE.path
    upstream: str | None = ROUTE.upstream
    #: `serve`: set on every upstream request, in place of the client's header of the same name
    headers: dict[HeaderName, HeaderValue] = Field(default_factory=dict)
    stage: Stage = ROUTE.stage
    host_dialect: HostDialect = ROUTE.host_dialect
    peer_dialect: Dialect = ROUTE.peer_dialect
    #: MCP only: the revision the hosts speak, and the server; two different ones are bridged
    #: (bridge/pipeline/eras.py). `auto`: whatever the host speaks goes to the server as it is
    host_era: Era = ROUTE.host_era
    server_era: Era = ROUTE.server_era
    #: across an era bridge: seconds the host has to answer a server's request carried to it
    #: (`input_required`, or a request of the bridge's), after which the bridge gives it up
    input_wait_s: Annotated[float, Field(gt=0)] = ROUTE.input_wait_s
    require_declaration: bool = ROUTE.require_declaration
    envelope: str = ROUTE.envelope
    #: toward a `claude-channel` host: the paragraph appended to the server's `instructions`
    #: (None: the built-in one, bridge/dialects/claude_channel.py)
    channel_instructions: str | None = ROUTE.channel_instructions
    #: toward a `claude-channel` host: each reminder sent as a channel event also rides the
    #: session's next tool result, once (Claude Code drops some channel events: docs/hosts.md)
    channel_also_tool_result: bool = ROUTE.channel_also_tool_result
    fallback: Fallback = Field(default_factory=Fallback)
    budget: Budget | None = ROUTE.budget
    trust: Trust = Field(default_factory=Trust)
    outbox: Outbox | None = ROUTE.outbox
    serve_outbox: ServeOutbox | None = ROUTE.serve_outbox
    #: `serve` only: browser origins whose requests the route accepts (requests without `Origin` always pass)
    allowed_origins: list[str] = Field(default_factory=lambda: list(ROUTE.allowed_origins))

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        return check_origins(v)

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f'must start with "/" (got {show(v)})')
        return v

    @field_validator("upstream")
    @classmethod
    def _upstream(cls, v: str) -> str:
        return check_url(v, UPSTREAM_SCHEMES)

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, v: str, info: ValidationInfo) -> str:
        path = _rules_path(v, info)
        if not Path(path).is_dir():
            raise ValueError(f"{show(path)} is not a directory")
        return path

    @field_validator("command_mode")
    @classmethod
    def _command_mode(cls, v: str, info: ValidationInfo) -> str:
        if v == "shared" and not info.data.get("command"):
            raise ValueError('"shared" is how `serve` runs a route\'s `command`; this route has none')
        return v

    @field_validator("envelope")
    @classmethod
    def _envelope(cls, v: str) -> str:
        check_envelope(v)
        return v

    @field_validator("host_dialect")
    @classmethod
    def _host_dialect(cls, v: str, info: ValidationInfo) -> str:
        problem = host_dialect_problem(v, info.data.get("protocol"))
        if problem is not None:
            raise ValueError(problem)
        return v

    @field_validator("host_era", "server_era")
    @classmethod
    def _era(cls, v: str, info: ValidationInfo) -> str:
        protocol = info.data.get("protocol")
        if v != "auto" and protocol not in (None, "mcp"):
            raise ValueError(f'names an MCP revision; this route\'s protocol is "{protocol}" (leave it "auto")')
        return v

    @field_validator("channel_instructions")
    @classmethod
    def _channel_instructions(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must say what the channel events are (leave the key out for the built-in paragraph)")
        _check_template(v, CHANNEL_PLACEHOLDERS, required=None)
        return v

    @field_validator("channel_also_tool_result")
    @classmethod
    def _channel_also_tool_result(cls, v: bool, info: ValidationInfo) -> bool:
        protocol, dialect = info.data.get("protocol"), info.data.get("host_dialect")
        if v and protocol not in (None, "mcp"):
            raise ValueError(f'applies to MCP routes only (a "claude-channel" host); this route\'s protocol is '
                             f'"{protocol}"')
        if v and dialect not in (None, "auto", "claude-channel"):
            raise ValueError(f'applies to a "claude-channel" host only, and this route\'s host_dialect is "{dialect}"; '
                             'set host_dialect = "claude-channel", or leave it "auto" for --host-dialect claude-channel')
        return v


class Route(RouteSettings):
    """A named route in a file: after merging [defaults], the protocol must be known."""

    protocol: Protocol

    @model_validator(mode="after")
    def _acp_is_not_http(self) -> "Route":
        if self.protocol == "acp" and self.upstream is not None and not self.upstream.startswith(("ws://", "wss://")):
            raise ValueError("ACP has no HTTP transport: give an acp route a ws:// or wss:// upstream, or run it "
                             "with `reminder-bridge stdio`")
        return self

    @model_validator(mode="after")
    def _stdio_behind_serve_is_mcp(self) -> "Route":
        if self.command and self.path is not None and self.upstream is None and self.protocol != "mcp":
            raise ValueError(f"command with a path: `serve` runs a stdio MCP server behind an HTTP route; this "
                             f"route's protocol is {self.protocol} (run it with `reminder-bridge stdio`)")
        return self

    @model_validator(mode="after")
    def _outboxes_are_mcp(self) -> "Route":
        if (self.outbox is not None or self.serve_outbox is not None) and self.protocol != "mcp":
            raise ValueError(f"outbox and serve_outbox are MCP resources; this route's protocol is {self.protocol}")
        if (self.outbox is not None and self.serve_outbox is not None and self.outbox.store and self.serve_outbox.store
                and self.outbox.store != self.serve_outbox.store):
            raise ValueError("outbox.store and serve_outbox.store differ; a route has one store (set it once)")
        if (self.outbox is not None and self.serve_outbox is not None and self.outbox.identity
                and self.serve_outbox.identity and self.outbox.identity != self.serve_outbox.identity):
            raise ValueError("outbox.identity and serve_outbox.identity differ; a route keys its outboxes one way "
                             "(set it once)")
        return self


class Telemetry(_Model):
    """OpenTelemetry export (spec §9)."""

    exporter: Literal["none", "console", "otlp"] = "none"
    otlp_endpoint: str | None = None
    sampling: Annotated[float, Field(ge=0, le=1)] = 1.0
    propagation_only: bool = False
    capture_bodies: bool = False

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        return check_url(v, ("http", "https"))


class Admin(_Model):
    """The admin port: /healthz, /readyz, /metrics, the console (spec §9, §13)."""

    listen: str = "127.0.0.1:9464"
    token: str = ""
    #: the console's live feed shows reminder bodies (untrusted text): off unless asked for
    show_bodies: bool = False
    #: how far back the migration-readiness verdict looks, in hours
    readiness_window_h: Annotated[float, Field(gt=0)] = 24.0

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        return check_hostport(v)


MIB = 1024 * 1024


class Limits(_Model):
    """What `serve` lets any one client hold, and all of them together (docs/http.md, Security).

    Read at start-up; a reload does not change them."""

    #: open client connections; 0 = as many as the file-descriptor limit allows (two per connection)
    max_connections: Annotated[int, Field(ge=0)] = 0
    #: seconds a client may take to send a request's headers, from its first byte or the connection's start
    header_timeout_s: Annotated[float, Field(gt=0)] = 15.0
    #: seconds a keep-alive connection may sit idle between requests
    idle_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    #: seconds a client may take to send a request body
    body_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    max_body_bytes: Annotated[int, Field(ge=1)] = 64 * MIB
    #: request bodies and upstream answers held in memory at once, all clients together
    max_inflight_bytes: Annotated[int, Field(ge=1)] = 512 * MIB
    #: one upstream answer the proxy reads whole (JSON bodies, agent cards)
    max_response_bytes: Annotated[int, Field(ge=1)] = 64 * MIB
    #: one server-sent event
    max_event_bytes: Annotated[int, Field(ge=1)] = 64 * MIB
    #: MCP sessions remembered per route; the least recently used is evicted beyond it
    max_sessions: Annotated[int, Field(ge=1)] = 10_000
    #: seconds an MCP session (or A2A task queue) is kept after its last use
    session_idle_s: Annotated[float, Field(gt=0)] = 3600.0
    #: stdio servers a route with a `command` runs at once (one per MCP session, by default)
    max_children: Annotated[int, Field(ge=1)] = 100


class Rules(_Model):
    """A whole rules file; `routes` already has [defaults] merged in."""

    version: int = 1
    defaults: RouteSettings = Field(default_factory=RouteSettings)
    routes: dict[str, Route] = Field(default_factory=dict)
    global_budget: GlobalBudget | None = None
    telemetry: Telemetry = Field(default_factory=Telemetry)
    admin: Admin = Field(default_factory=Admin)
    limits: Limits = Field(default_factory=Limits)
    #: where budgets, queued reminders and session records live (spec §12): this process, or Redis
    state: StateSettings = Field(default_factory=StateSettings)

    @field_validator("version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != 1:
            raise ValueError(f"must be 1, the only rules-file version (got {v})")
        return v

    def route(self, name: str) -> RouteSettings:
        """The merged settings of route `name`; KeyError lists the routes that do exist."""
        try:
            return self.routes[name]
        except KeyError:
            known = ", ".join(sorted(self.routes)) or "none"
            raise KeyError(f"unknown route {name!r} (known routes: {known})") from None


def check_envelope(template: str) -> None:
    """Raise ValueError unless `template` uses only the known placeholders and contains {body}."""
    _check_template(template, ENVELOPE_PLACEHOLDERS, required="body")


def _check_template(template: str, placeholders: tuple[str, ...], required: str | None) -> None:
    """ValueError unless ``template`` uses only ``placeholders``, and ``required`` when one is named."""
    allowed = " ".join("{%s}" % p for p in placeholders)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError:
        raise ValueError("has an unmatched brace; write {{ or }} for a literal brace") from None
    names = set()
    for _, name, spec, conv in parts:
        if name is None:
            continue
        if name not in placeholders:
            raise ValueError(f"unknown placeholder {{{name}}} (allowed: {allowed})")
        if spec or conv:
            raise ValueError(f"placeholder {{{name}}} may not carry a format spec or conversion")
        names.add(name)
    if required is not None and required not in names:
        raise ValueError(f"must contain {{{required}}} (allowed placeholders: {allowed})")


#: what an `upstream` may be: an HTTP route, or a WebSocket one
UPSTREAM_SCHEMES = ("http", "https", "ws", "wss")
_WORDS = {UPSTREAM_SCHEMES: "an http(s):// or ws(s):// URL", ("http", "https"): "an http(s):// URL"}


def check_url(v: str, schemes: tuple[str, ...]) -> str:
    """``v`` if it is a URL of one of ``schemes`` with a host; ValueError says what is expected (and
    what was probably meant, for a bare HOST:PORT). Userinfo and query values are never quoted."""
    try:
        parts = urlsplit(v)
        ok = parts.scheme in schemes and bool(parts.hostname)
        parts.port  # raises on a bad port
    except ValueError:
        ok = False
    if ok:
        return v
    bare = "://" not in v and re.fullmatch(r"[\w.\-\[\]]+:\d+(/.*)?", v)  # HOST:PORT[/PATH]
    hint = f'; did you mean "{schemes[0]}://{redact(v)}"?' if bare else ""
    raise ValueError(f"must be {_WORDS.get(schemes, ' or '.join(schemes) + ' URL')} (got {show(redact(v))}){hint}")


def check_hostport(v: str) -> str:
    """``v`` if it is HOST:PORT with a port 0-65535 (an IPv6 host in brackets)."""
    host, _, port = v.rpartition(":")
    if not host.strip("[]") or not port.isdigit() or int(port) > 65535:
        raise ValueError(f'must be HOST:PORT with a port 0-65535, e.g. "127.0.0.1:9464" (got {show(v)})')
    return v


# ---------------------------------------------------------------- loading


def load_rules(path: str | Path) -> Rules:
    """Read and validate one rules file; raise RulesError with all of its problems."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RulesError([RuleProblem(str(path), None, "", f"cannot read rules file: {e}")]) from None
    return parse_rules_text(text, str(path))


def check_files(paths: Iterable[str | Path]) -> list[RuleProblem]:
    """All problems in all files (empty list = all good); backs `reminder-bridge check`."""
    problems: list[RuleProblem] = []
    for p in paths:
        try:
            load_rules(p)
        except RulesError as e:
            problems.extend(e.problems)
    return problems


_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def parse_rules_text(text: str, file: str = "<string>", environ: Mapping[str, str] | None = None) -> Rules:
    """Validate rules given as TOML text; `file` only names the source in problems, ``environ`` is
    where `${NAME}` in `headers` and `env` values is read (default: this process's environment)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg, m = str(e), _TOML_AT.search(str(e))
        if m:
            line, msg = int(m.group(1)), f"{_TOML_AT.sub('', msg)} (column {m.group(2)})"
        else:  # "(at end of document)"
            line, msg = max(1, len(text.splitlines())), msg.replace("document", "file")
        raise RulesError([RuleProblem(file, line, "", f"TOML syntax error: {msg}")]) from None

    lines = locate_keys(text)
    problems: list[RuleProblem] = []

    def problem(path: tuple, message: str) -> None:
        problems.append(RuleProblem(file, line_of(lines, path), dotted(path), message))

    defaults = raw.get("defaults", {})
    routes = raw.get("routes", {})
    data = dict(raw)
    if isinstance(routes, dict):
        for name in routes:
            if not ROUTE_NAME.fullmatch(name):
                problem(("routes", name), "route name may use only letters, digits, '_', '.' and '-'")
        data["routes"] = {n: _merge(defaults, r) for n, r in routes.items()}

    try:
        rules = Rules.model_validate(data, context={"rules_dir": str(Path(file).parent) if file != "<string>" else None,
                                                    "environ": environ if environ is not None else os.environ})
    except ValidationError as e:
        errors = e.errors(include_url=False)
        reported = {tuple(err["loc"]) for err in errors}
        for err in errors:
            loc = tuple(part for part in err["loc"] if part != "[key]")  # a bad key of a table: the key itself
            if loc[:1] == ("routes",) and len(loc) > 2 and isinstance(routes, dict):
                rest = loc[2:]
                if not _has(routes.get(loc[1]), rest) and ("defaults", *rest) in reported:
                    continue  # inherited from [defaults], which reports it as defaults.…
            problem(loc, explain(err, Rules))
    else:
        if not problems:
            return rules
    problems.sort(key=lambda p: (p.line or 0, p.key))
    raise RulesError(problems)


def _merge(base: Any, over: Any) -> Any:
    """Deep-merge [defaults] under a route: tables merge key by key, anything else replaces."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base[k], v) if k in base else v
    return out


def _has(data: Any, path: tuple) -> bool:
    for part in path:
        if isinstance(part, int):
            return isinstance(data, list)
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


