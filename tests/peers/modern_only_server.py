"""tests.peers.legacy_only_server's tools, resource and prompt, served by the SDK's dual-era loop
behind a gate that lets through only 2026-07-28: a request without the per-request `_meta`
envelope (`initialize` among them) is refused with -32600 and never reaches the SDK, and so is
`notifications/initialized`, as a server that speaks only 2026-07-28 behaves.

    python -m tests.peers.modern_only_server SEEN_FILE

Every message it receives (refused or not) is appended to SEEN_FILE, one JSON object a line.
"""
from __future__ import annotations

import json
import sys
import warnings
from typing import TextIO

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import SessionMessage

from tests.peers.legacy_only_server import build, dumped

ENVELOPE = "io.modelcontextprotocol/protocolVersion"


def refused(msg: dict) -> bool:
    """What a 2026-07-28-only server does not take: the handshake, and requests without the envelope."""
    if msg.get("method") == "notifications/initialized":
        return True
    meta = (msg.get("params") or {}).get("_meta") or {}
    return "method" in msg and "id" in msg and (msg["method"] == "initialize" or ENVELOPE not in meta)


async def main(seen: TextIO) -> None:
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    low = build()._lowlevel_server
    async with stdio_server() as (read, write):
        send, receive = anyio.create_memory_object_stream(64)

        async def gate() -> None:
            async with send:
                async for item in read:
                    if isinstance(item, SessionMessage):
                        msg = dumped(item.message)
                        seen.write(json.dumps(msg) + "\n")
                        if refused(msg):
                            if "id" in msg:
                                await write.send(SessionMessage(types.JSONRPCError(
                                    jsonrpc="2.0", id=msg["id"],
                                    error=types.ErrorData(code=-32600, message="this server speaks 2026-07-28 only"))))
                            continue
                    await send.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(gate)
            await low.run(receive, write, low.create_initialization_options())
            group.cancel_scope.cancel()


if __name__ == "__main__":
    with open(sys.argv[1], "a", buffering=1) as record:
        anyio.run(main, record)
