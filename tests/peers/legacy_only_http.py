"""tests.peers.legacy_only_server's tools, resource and prompt over Streamable HTTP, 2025-11-25 only
(`touch`'s notifications on the session's GET stream, the others' on their call's stream):
the SDK's app behind a gate that refuses (400) any request naming 2026-07-28, in its
`MCP-Protocol-Version` header or a `_meta` key of that era, as a server that never moved does.

    python -m tests.peers.legacy_only_http

`/seen` lists every request that reached it (method, lower-case headers, body). Prints `PORT <n>`.
"""
from __future__ import annotations

import socket
import warnings
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp.server import MCPServer
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPDeprecationWarning
from starlette.responses import JSONResponse

from tests.peers.legacy_only_server import build

MODERN = "2026-07-28"


def refused(method: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why a 2025-11-25-only server refuses a request (None: it takes it)."""
    if headers.get("mcp-protocol-version") == MODERN or b"io.modelcontextprotocol/" in body:
        return "2025-11-25 only"
    return None


def run(gate: Callable[[str, dict[str, str], bytes], str | None], server: MCPServer | None = None) -> None:
    """``server`` (`build(http=True)`'s by default) as the SDK's Streamable HTTP app behind ``gate``
    (a reason: 400 with a JSON-RPC error, or 405 for a GET or DELETE), recording every request at
    `/seen`; prints `PORT <n>`."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging is fine at 2025-11-25
    server = server or build(http=True)
    low = server._lowlevel_server
    plain = low.create_initialization_options
    changed = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    low.create_initialization_options = lambda *_, **__: plain(changed)  # (the SDK's HTTP runner names none)
    sdk = server.streamable_http_app()
    seen: list[dict[str, Any]] = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return await sdk(scope, receive, send)
        if scope["path"] == "/seen":
            return await JSONResponse(seen)(scope, receive, send)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        seen.append({"method": scope["method"], "headers": headers, "body": body.decode()})
        why = gate(scope["method"], headers, body)
        if why is not None:
            refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": why}}
            status = 400 if scope["method"] == "POST" else 405
            return await JSONResponse(refusal, status_code=status)(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await sdk(scope, replay, send)

    print(f"PORT {port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    run(refused)
