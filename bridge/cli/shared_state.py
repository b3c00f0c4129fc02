"""The shared state a command runs on (spec §12): `--state URL`, else the rules file's `[state]`."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from bridge.rules import Rules
from bridge.state import FailoverState, StateSettings, open_state
from bridge.telemetry import register_collector


def state_settings(url: str | None, rules: Rules | None) -> StateSettings:
    """The `[state]` table with ``url`` (the `--state` flag) in place of its own; ValueError names
    what is wrong with a bad URL (never its password)."""
    settings = rules.state if rules is not None else StateSettings()
    if url is None:
        return settings
    try:
        return StateSettings.model_validate({**settings.model_dump(), "url": url})
    except ValidationError as exc:
        raise ValueError(f"--state: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def open_shared(settings: StateSettings, log: Callable[..., Any]) -> FailoverState | None:
    """The backend every route's policy and flows share, or None for this process's memory.
    ``log(event, level=..., **fields)`` (a Recorder's) gets each outage and recovery, once; the
    counters reach `/metrics`."""
    if not settings.shared:
        return None

    def log_once(event: str, **fields: Any) -> None:
        log(event, level="error" if event == "state_unavailable" else "warning", **fields)

    state = open_state(settings.url, key_prefix=settings.key_prefix, on_unavailable=settings.on_unavailable,
                       timeout_ms=settings.timeout_ms, log=log_once)
    assert isinstance(state, FailoverState)
    register_collector(state)
    return state
