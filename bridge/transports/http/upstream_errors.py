"""What the host is told when the upstream cannot answer: a JSON-RPC error for each request it sent
that is still unanswered (spec §8.3), with the cause said without the upstream's secrets."""
from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from bridge.jsonrpc import error_response
from bridge.pipeline.inflight import Unanswered

if TYPE_CHECKING:
    from bridge.transports.forwarding import Upstream
    from bridge.transports.sessions import Session

#: The answer to a JSON-RPC request the upstream could not give (spec §8.3).
UPSTREAM_ERROR = -32603


class TimedOut(asyncio.TimeoutError):
    """The upstream did not answer within a time the proxy was told (`stdio --upstream-timeout`):
    its cause names the time and the setting, so a host's error says which knob to turn."""

    def __init__(self, seconds: float, setting: str):
        super().__init__(f"did not answer within {seconds:g} s ({setting})")


def cause(exc: BaseException) -> str:
    if isinstance(exc, TimedOut):
        return str(exc)
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        exc = exc.os_error
    if isinstance(exc, OSError) and exc.errno:
        return f"cannot connect ({os.strerror(exc.errno)})"
    return str(exc) or type(exc).__name__


class Proxied(Protocol):
    """What an error names: a route of `serve`, or the upstream of `stdio --upstream`."""

    name: str
    target: Upstream

    def shown(self, text: str) -> str: ...


def upstream_error(route: Proxied, msg_id: Any, exc: BaseException) -> dict[str, Any]:
    shown = route.shown(cause(exc))
    return error_response(msg_id, UPSTREAM_ERROR, f"reminder-bridge route {route.name!r}: upstream "
                                                  f"{route.target.shown} {shown}",
                          {"route": route.name, "upstream": route.target.shown, "cause": shown})


def unanswered(route: Proxied, session: Session | None, body: bytes, exc: BaseException) -> list[bytes]:
    """The error answers for the requests ``body`` carried that no response has answered yet: the
    session's flow knows which (it saw ``body`` and every answer); a body no flow saw (a request
    relayed as it came) has all of its requests answered."""
    error = upstream_error(route, None, exc)["error"]
    if session is not None:
        return [reply.data for reply in session.flow.upstream_gone(error, body)]
    unseen = Unanswered()
    unseen.asked(body)
    return [data for _, data in unseen.errors(error)]
