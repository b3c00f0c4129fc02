"""The host adapters (spec §11): codecs toward a host with a push path of its own, each for one
protocol only, and never picked by `auto`.

The one registry of them: the rules' `host_dialect` values, `translate --target`, the MCP codecs
written toward a host and the refusal of an adapter on another protocol's route all read it.
"""
from __future__ import annotations

import importlib
from functools import cached_property
from typing import Any, NamedTuple


class _Adapter(NamedTuple):
    name: str
    protocol: str
    title: str
    codec_path: str


class HostAdapter(_Adapter):
    """One host adapter: its dialect name, the protocol it belongs to, what it is, and where its
    codec is (``module:Class``). The codec is imported at its first use, not with the registry: the
    command line reads the names before `stdio` starts its child, and a codec imports the reminder
    model. (A named tuple, not a dataclass: `dataclasses` imports `inspect`, ~8 ms before the spawn;
    the subclass has a `__dict__` for the cached codec.)"""

    @cached_property
    def codec(self) -> Any:
        module, _, name = self.codec_path.partition(":")
        return getattr(importlib.import_module(module), name)


#: dialect name → the adapter, in the order help texts list them
HOST_ADAPTERS: dict[str, HostAdapter] = {
    adapter.name: adapter for adapter in (
        HostAdapter("claude-channel", "mcp", "Claude Code channels", "bridge.dialects.claude_channel:ClaudeChannel"),
    )
}
#: what a route's sides may speak (spec §11): the reminder dialects, and toward a host its adapters too
REMINDER_DIALECTS: tuple[str, ...] = ("auto", "standard", "legacy", "none")
HOST_DIALECTS: tuple[str, ...] = (*REMINDER_DIALECTS, *HOST_ADAPTERS)


def codecs_toward_host(protocol: str) -> dict[str, Any]:
    """dialect name → codec of the adapters a ``protocol`` route may write toward its host."""
    return {a.name: a.codec for a in HOST_ADAPTERS.values() if a.protocol == protocol}


def adapter_of(dialect: str | None, protocol: str) -> HostAdapter | None:
    """The host adapter ``dialect`` names on a ``protocol`` route; None for a reminder dialect."""
    adapter = HOST_ADAPTERS.get(dialect or "")
    return adapter if adapter is not None and adapter.protocol == protocol else None


def protocol_of(dialect: str | None) -> str | None:
    """The protocol a host adapter belongs to; None for a dialect that is no adapter."""
    adapter = HOST_ADAPTERS.get(dialect or "")
    return adapter.protocol if adapter is not None else None


def host_dialect_problem(dialect: str | None, protocol: str | None) -> str | None:
    """Why ``dialect`` cannot be the host dialect of a ``protocol`` route (a host adapter of another
    protocol), or None. An unknown protocol (a stdio route left to detect it) is no problem."""
    adapter = HOST_ADAPTERS.get(dialect or "")
    if adapter is None or protocol is None or protocol == adapter.protocol:
        return None
    return f'"{dialect}" is a host dialect for {adapter.protocol.upper()} only ({adapter.title}), not for {protocol}'
