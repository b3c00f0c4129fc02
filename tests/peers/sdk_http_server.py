"""An MCP server built with the official SDK (`mcp.server.MCPServer`) over HTTP, for `stdio --upstream`:
Streamable HTTP with an event store (resumption), or the 2024-11-05 HTTP+SSE transport (`--sse`).

    python -m tests.peers.sdk_http_server [--sse [PATH]] [--port N]

Tools: `echo {text}`; `remind {path}` sends a legacy Harn reminder (`notifications/message` with
`_meta.harn.reminder`) on the call's stream, then answers; `announce {text}` sends a log line on the
session's own stream (the GET stream), not the call's; `hang_up {text}` closes the GET stream first
(the line reaches only a client that resumes it); `interrupted {text}` closes its call's SSE
stream, then answers (only a client that resumes gets the answer); `wait {seconds}` answers after
that long; `die` ends the process mid-call,
after one notification. `/seen` lists every request that reached the server, with its headers.
The SDK's capabilities have no slot for the legacy declaration: a proxy in front of it needs
`require_declaration = false` to take its reminders. `--port N` listens on a fixed port (a test
restarts it there: the new process knows none of the old one's sessions). Prints `PORT <n>`.
"""
from __future__ import annotations

import asyncio
import os
import socket
import sys
import warnings
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from starlette.responses import JSONResponse

from tests.peers.resumable_mcp_server import RETRY_MS, MemoryEventStore
from tests.peers.sdk_tools import add_echo_and_remind


def build() -> MCPServer:
    server = MCPServer("sdk-http")

    add_echo_and_remind(server)

    @server.tool()
    async def announce(text: str, ctx: Context) -> str:
        """A log line on the session's own stream (the GET stream): no request it belongs to."""
        await ctx.session.send_notification(types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level="info", logger="announce", data=text)))
        return "announced"

    @server.tool()
    async def hang_up(text: str, ctx: Context) -> str:
        """Close the session's own stream (the GET stream), then send a log line on it: only a
        client that comes back with `Last-Event-ID` gets it (the event store replays it)."""
        await ctx.close_standalone_sse_stream()
        await ctx.session.send_notification(types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level="info", logger="announce", data=text)))
        return "hung up"

    @server.tool()
    async def interrupted(text: str, ctx: Context) -> str:
        await ctx.info("before the stream closed")
        await ctx.close_sse_stream()
        await ctx.info("after the stream closed")
        return text

    @server.tool()
    async def wait(seconds: float) -> str:
        await asyncio.sleep(seconds)  # a slow tool is the behaviour asked for
        return "waited"

    @server.tool()
    async def die(ctx: Context) -> str:
        await ctx.info("about to die")
        os._exit(3)

    return server


def main() -> None:
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
    else:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging is fine at 2025-11-25
    if "--sse" in sys.argv:  # its stream at /sse, or at the path that follows
        after = sys.argv[sys.argv.index("--sse") + 1:]
        path = after[0] if after and not after[0].startswith("--") else "/sse"
        sdk = build().sse_app(sse_path=path, host="127.0.0.1")
    else:
        sdk = build().streamable_http_app(event_store=MemoryEventStore(), retry_interval=RETRY_MS)
    seen: list[dict[str, Any]] = []

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/seen":
            return await JSONResponse(seen)(scope, receive, send)
        if scope["type"] == "http":
            seen.append({"method": scope["method"], "path": scope["path"],
                         "headers": {k.decode().lower(): v.decode() for k, v in scope["headers"]}})
        return await sdk(scope, receive, send)

    print(f"PORT {port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
