"""tests.peers.legacy_only_server's tools, resource and prompt over Streamable HTTP, 2025-11-25 only:
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
from mcp.shared.exceptions import MCPDeprecationWarning
from starlette.responses import JSONResponse

from tests.peers.legacy_only_server import build

MODERN = "2026-07-28"


def refused(method: str, headers: dict[str, str], body: bytes) -> bool:
    """What a 2025-11-25-only server does not take: anything naming 2026-07-28."""
    return headers.get("mcp-protocol-version") == MODERN or b"io.modelcontextprotocol/" in body


def main(refuses: Callable[[str, dict[str, str], bytes], bool] = refused, refusal: str = "2025-11-25 only",
         server: MCPServer | None = None) -> None:
    """``server`` (`build()`'s) over Streamable HTTP behind a gate: a request ``refuses`` accepts gets
    400 and a JSON-RPC error (``refusal``), and never reaches the SDK."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging is fine at 2025-11-25
    sdk = (server or build()).streamable_http_app()
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
        if refuses(scope["method"], headers, body):
            answer = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": refusal}}
            return await JSONResponse(answer, status_code=400)(scope, receive, send)
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
    main()
