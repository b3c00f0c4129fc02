"""What the host is told when the upstream cannot answer: a JSON-RPC error for the request it sent
(spec §8.3), with the cause said without the upstream's secrets."""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import aiohttp

from bridge.jsonrpc import classify, error_response
from bridge.transports.http.routes import HttpRoute

#: The answer to a JSON-RPC request the upstream could not give (spec §8.3).
UPSTREAM_ERROR = -32603


def request_id(body: bytes) -> Any:
    """The id of the JSON-RPC request ``body``, read off its bytes (for error answers only: the
    flow did not need to parse a request it passed)."""
    if not body:
        return None
    kind, token = classify(body)
    if kind == "request" and token is not None:
        return json.loads(token)
    if kind == "slow" and len(body) <= 1 << 20:
        try:
            msg = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return msg.get("id") if isinstance(msg, dict) and "method" in msg else None
    return None


def cause(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        exc = exc.os_error
    if isinstance(exc, OSError) and exc.errno:
        return f"cannot connect ({os.strerror(exc.errno)})"
    return str(exc) or type(exc).__name__


def upstream_error(route: HttpRoute, msg_id: Any, exc: BaseException) -> dict[str, Any]:
    shown = route.shown(cause(exc))
    return error_response(msg_id, UPSTREAM_ERROR, f"reminder-bridge route {route.name!r}: upstream "
                                                  f"{route.target.shown} {shown}",
                          {"route": route.name, "upstream": route.target.shown, "cause": shown})
