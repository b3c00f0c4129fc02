"""The per-connection facts the spec's rules read, each rule in one place: which reminder dialect
each side speaks, and what the route's stage lets the proxy do.

`Side` is one row of a flow's state table: what the rules configured, what the handshake (or the
first reminder message) showed, and what to assume until then.  `auto` resolution is
`Side.dialect`; learning is `Side.learn`; a reload is `Side.configure`.  The stage rules
(`observe` changes nothing on the wire, `dual` keeps legacy decorations where the same message
can carry both, `enforce` refuses legacy reminders from the host side with one error) are the
functions below, used alike by MCP, ACP and A2A.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.jsonrpc import error_response

DIALECTS = ("auto", "standard", "legacy", "none")
#: Reminder dialects a side can actually speak on a wire.
SPOKEN = ("standard", "legacy")
STAGES = ("observe", "dual", "translate", "enforce")

#: What `enforce` answers a legacy reminder from the host side with, on every protocol.
ENFORCE_CODE = -32602


@dataclass
class Side:
    """One side's reminder dialect. A configured dialect (rules, CLI) is never second-guessed;
    with `auto`, what the side's handshake showed wins, and ``assumed`` holds until then."""

    configured: str = "auto"
    learned: str | None = None
    assumed: str = "standard"

    @property
    def fixed(self) -> bool:
        return self.configured != "auto"

    @property
    def known(self) -> bool:
        return self.fixed or self.learned is not None

    @property
    def dialect(self) -> str:
        if self.configured != "auto":  # `fixed`, spelled out: read several times per reminder
            return self.configured
        return self.learned if self.learned is not None else self.assumed

    def learn(self, dialect: str) -> None:
        if not self.fixed:
            self.learned = dialect

    def configure(self, dialect: str) -> None:
        """A reload: a dialect the new rules name replaces the one in use; `auto` keeps the one in
        use (learned, or named on the command line)."""
        if dialect != "auto":
            self.configured = dialect


def observes(stage: str) -> bool:
    """`observe`: decisions are counted and traced; the wire is untouched."""
    return stage == "observe"


def keeps_legacy(stage: str) -> bool:
    """`dual`: translate, and keep the legacy decoration on a message that can carry both."""
    return stage == "dual"


def refuses_legacy(stage: str) -> bool:
    """`enforce`: legacy reminder input from the host side is refused (`enforce_error`)."""
    return stage == "enforce"


def enforce_error(msg_id: Any, what: str, standard: str) -> dict[str, Any]:
    """The one answer `enforce` gives, naming what was refused and the standard way to say it."""
    return error_response(msg_id, ENFORCE_CODE, f"{what} is refused on this route (stage enforce): send {standard}",
                          {"stage": "enforce", "standardMethod": standard})
