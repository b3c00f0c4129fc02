"""`[state]` in a rules file (and `serve --state URL`): where shared state lives.

Kept free of bridge.rules imports so bridge.rules can import it.  Same model conventions as the
rules models: unknown keys refused, exact TOML types, frozen.

    [state]
    url = "redis://redis:6379/0"      # absent or "memory": this process only (the default)
    key_prefix = "reminder-bridge:"   # one per fleet sharing a Redis
    on_unavailable = "open"           # or "closed"
    timeout_ms = 250                  # socket timeout toward Redis
"""
from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bridge.urls import redact

MEMORY = "memory"
SCHEMES = ("redis", "rediss", "unix")
URL_HELP = ('must be "memory", redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS) or '
            "unix:///PATH/TO/redis.sock[?db=N]")


def check_state_url(url: str | None) -> str | None:
    """``url`` if it names a backend we can open, else ValueError saying what is expected."""
    if url is None or url == MEMORY or url == MEMORY + "://":
        return None if url is None else MEMORY
    shown = redact(url)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError when not a number in 0-65535
    except ValueError as exc:
        raise ValueError(f"{URL_HELP} (got {shown!r}: {exc})") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"{URL_HELP} (got {shown!r}: unknown scheme {parts.scheme or '(none)'!r})")
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"{URL_HELP} (got {shown!r}: no socket path)")
        return url
    if not parts.hostname:
        raise ValueError(f"{URL_HELP} (got {shown!r}: no host)")
    if port == 0:
        raise ValueError(f"{URL_HELP} (got {shown!r}: port 0)")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"{URL_HELP} (got {shown!r}: the database must be a number, not {db!r})")
    return url


class StateSettings(BaseModel):
    """Where budgets, queued reminders, dedupe keys and session records live (spec §12)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    url: str | None = None
    key_prefix: Annotated[str, Field(min_length=1, max_length=200)] = "reminder-bridge:"
    on_unavailable: Literal["open", "closed"] = "open"
    timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 250

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return check_state_url(v)

    @field_validator("key_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if any(c.isspace() or ord(c) < 32 for c in v):
            raise ValueError(f"must not contain spaces or control characters (got {v!r})")
        return v

    @property
    def shared(self) -> bool:
        """True when state is shared with other processes (a Redis URL)."""
        return self.url not in (None, MEMORY)
