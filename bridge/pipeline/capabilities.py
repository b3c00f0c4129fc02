"""What each side of a handshake is told about reminders (spec §3-§5): one rule for MCP's
`initialize` / `server/discover` result, ACP's `agentCapabilities` and A2A's agent card.

The peer's declaration is read with every codec of the protocol and recorded (the dialect it
speaks is the first that declared anything); the host is then told the peer's capability in the
host's own dialect, when the host's dialect is a reminder dialect and the peer did not already
say it that way.  `observe` leaves the wire as it came (the flow base discards the rewrite), and
`dual` changes nothing here: a capability has no decoration to keep.  What differs between the
protocols is stated per protocol in one `CapabilityRule`, not coded three times.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Cap = dict[str, Any]


@dataclass(frozen=True)
class Declared:
    """A peer's handshake, read: per dialect, the capability it declared, or None."""

    caps: Mapping[str, Cap | None]

    @property
    def spoken(self) -> str:
        """The dialect the peer speaks as far as its handshake shows: the first that declared, else `none`."""
        return next((name for name, cap in self.caps.items() if cap is not None), "none")

    @property
    def any(self) -> bool:
        return self.spoken != "none"


@dataclass(frozen=True)
class CapabilityRule:
    """How one protocol tells its host about the peer's reminder capability.

    ``borrow``: when the peer's own dialect declared nothing, what another dialect declared is
    told (MCP, A2A; an ACP agent's dialect decides what it can honour).  ``exclusive``: the host
    is told its own dialect only, the others' declarations removed (MCP, A2A; ACP adds).
    ``replaces``: a host-dialect declaration unlike the peer's is overwritten (MCP); else any
    declaration in the host's dialect stands.
    """

    codecs: Mapping[str, Any]
    borrow: bool
    exclusive: bool
    replaces: bool

    def read(self, caps: Any) -> Declared:
        return Declared({name: codec.read_capability(caps) for name, codec in self.codecs.items()})

    def told(self, declared: Declared, *, peer: str, host: str, held: Cap | None = None) -> Cap | None:
        """The capability the host must now be told in its dialect ``host``, or None when what
        the peer declared stands. ``held``: what the proxy honours itself when the peer declared
        nothing (ACP `hold`)."""
        cap = declared.caps.get(peer)
        if not cap and self.borrow:  # an empty one too: another dialect may say more
            cap = next((c for c in declared.caps.values() if c is not None), cap)
        if cap is None:
            cap = held
        if host not in self.codecs or cap is None:
            return None
        own = declared.caps.get(host)
        if own == cap if self.replaces else own is not None:
            return None
        return cap

    def write(self, caps: dict[str, Any], host: str, cap: Cap) -> None:
        """``cap`` into ``caps`` (a copy the flow owns) in the host's dialect."""
        if not self.exclusive:
            self.codecs[host].write_capability(caps, cap)
            return
        for name, codec in self.codecs.items():
            codec.write_capability(caps, cap if name == host else None)

    def withdraw(self, caps: dict[str, Any]) -> None:
        """Every reminder capability out of ``caps``: for a host that gets reminders another way (a
        host adapter's own push path)."""
        for codec in self.codecs.values():
            codec.write_capability(caps, None)
