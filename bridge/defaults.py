"""The built-in route settings (no rules file), as plain objects, written once: the rules schema
(bridge/rules.py) takes every default of `RouteSettings`, `Fallback` and `Trust` from here.

Why plain: `stdio -- CMD` without a rules file runs on these, so the first answer a host waits
for needs no pydantic (issue 23: the cold start; pydantic and the schema are ~150 ms of CPU).
A rules file, `serve` or `translate` build the validated models instead; the pipeline reads
either the same way (attributes only), and `--host-era`/`--server-era` replace keys of these.
"""
from __future__ import annotations

from types import SimpleNamespace
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


class Plain(SimpleNamespace):
    """Read-only values set once: a namespace costs nothing to define at start, where each
    dataclass generates its methods (~1 ms apiece here)."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only (make another with replace())")

    def replace(self, **changes: Any) -> Any:
        """The same values with ``changes`` over them."""
        unknown = set(changes) - set(vars(self))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no {', '.join(sorted(unknown))}")
        return type(self)(**{**vars(self), **changes})


class FallbackDefaults(Plain):
    """`Fallback`'s defaults: what to do when one side has no reminder support at all (spec §3-§5)."""


class TrustDefaults(Plain):
    """`Trust`'s defaults: limits on untrusted reminder content (spec §7)."""


class RouteDefaults(RouteReading, Plain):
    """`RouteSettings()`, the built-in behaviour, without the schema (see the module docstring);
    its keys in `RouteSettings`' order."""


FALLBACK = FallbackDefaults(mcp_host_none="tool_result", acp_agent_none="hold", a2a_peer_none="prepend")
TRUST = TrustDefaults(
    max_body_bytes=4096, max_tags=16, max_tag_chars=64, max_id_bytes=128, max_dedupe_key_bytes=256,
    max_reminder_bytes=16384, max_pending_per_session=64, strip_control=True, role_hint_ceiling=None,
)
ROUTE = RouteDefaults(
    protocol=None, command=None, env={}, cwd=None, command_mode="session", path=None, upstream=None, headers={},
    stage="translate", host_dialect="auto", peer_dialect="auto", host_era="auto", server_era="auto",
    input_wait_s=300.0,
    require_declaration=True, envelope=DEFAULT_ENVELOPE, channel_instructions=None, channel_also_tool_result=False,
    fallback=FALLBACK, budget=None, trust=TRUST, outbox=None, serve_outbox=None, allowed_origins=[LOOPBACK_ORIGINS],
)
