"""The built-in route settings (no rules file), as plain objects, written once: the rules schema
(bridge/rules.py) takes every default of `RouteSettings`, `Fallback` and `Trust` from here.

Why plain: `stdio -- CMD` without a rules file runs on these, so the first answer a host waits
for needs no pydantic (issue 23: the cold start; pydantic and the schema are ~150 ms of CPU).
A rules file, `--host-era`/`--server-era` or `serve` build the validated models instead; the
pipeline reads either the same way (attributes only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bridge.urls import LOOPBACK_ORIGINS

#: The name of a route that was given none (no rules file, or a file without routes).
UNNAMED_ROUTE = "default"
DEFAULT_ENVELOPE = '<system-reminder id="{id}" source="{source}">{body}</system-reminder>'


class RouteReading:
    """What a route's settings say beyond their keys, for `RouteSettings` and `RouteDefaults` alike."""

    @property
    def identity(self) -> str | None:
        """What keys the outbox of a request with no MCP session (`header:<name>`), if the rules name it."""
        return next((t.identity for t in (self.serve_outbox, self.outbox) if t is not None and t.identity), None)

    @property
    def bridged_server_era(self) -> str | None:
        """The era the proxy speaks to the server in its hosts' place (the server speaks only that
        one, and the hosts may speak the other), or None: the host's era goes through."""
        return self.server_era if self.server_era != "auto" and self.host_era != self.server_era else None


@dataclass(frozen=True)
class FallbackDefaults:
    """`Fallback`'s defaults: what to do when one side has no reminder support at all (spec §3-§5)."""

    mcp_host_none: str = "tool_result"
    acp_agent_none: str = "hold"
    a2a_peer_none: str = "prepend"


@dataclass(frozen=True)
class TrustDefaults:
    """`Trust`'s defaults: limits on untrusted reminder content (spec §7)."""

    max_body_bytes: int = 4096
    max_tags: int = 16
    max_tag_chars: int = 64
    max_id_bytes: int = 128
    max_dedupe_key_bytes: int = 256
    max_reminder_bytes: int = 16384
    max_pending_per_session: int = 64
    strip_control: bool = True
    role_hint_ceiling: str | None = None


@dataclass(frozen=True)
class RouteDefaults(RouteReading):
    """`RouteSettings()`, the built-in behaviour, without the schema (see the module docstring)."""

    protocol: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    command_mode: str = "session"
    path: str | None = None
    upstream: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stage: str = "translate"
    host_dialect: str = "auto"
    peer_dialect: str = "auto"
    host_era: str = "auto"
    server_era: str = "auto"
    require_declaration: bool = True
    envelope: str = DEFAULT_ENVELOPE
    channel_instructions: str | None = None
    channel_also_tool_result: bool = False
    fallback: FallbackDefaults = field(default_factory=FallbackDefaults)
    budget: Any = None
    trust: TrustDefaults = field(default_factory=TrustDefaults)
    outbox: Any = None
    serve_outbox: Any = None
    allowed_origins: list[str] = field(default_factory=lambda: [LOOPBACK_ORIGINS])


FALLBACK = FallbackDefaults()
TRUST = TrustDefaults()
ROUTE = RouteDefaults()
