"""tests.peers.outbox_server's outbox (a NimbleBrain-style resource over a SQLite file the test
writes into), served at one MCP revision only, as tests.peers.legacy_only_server /
modern_only_server serve their tools: the SDK's handshake-only loop for 2025-11-25, its dual-era
loop behind modern_only_server's gate for 2026-07-28; with `--http`, behind legacy_only_http's or
modern_only_http's gate (prints `PORT <n>`).

    python -m tests.peers.era_outbox_server DB ERA [--http]
"""
from __future__ import annotations

import sys
import warnings

import anyio
import mcp_types as types
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import SessionMessage

from tests.peers import legacy_only_http, modern_only_http, outbox_server
from tests.peers.legacy_only_server import dumped
from tests.peers.modern_only_server import refused

LEGACY = "2025-11-25"


async def stdio(db: str, era: str) -> None:
    low = outbox_server.build(db)._lowlevel_server
    async with stdio_server() as (read, write):
        if era == LEGACY:
            async with low.lifespan(low) as state:
                await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())
            return
        send, receive = anyio.create_memory_object_stream(64)

        async def gate() -> None:
            async with send:
                async for item in read:
                    if isinstance(item, SessionMessage) and refused(msg := dumped(item.message)):
                        if "id" in msg:
                            await write.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=msg["id"], error=
                                types.ErrorData(code=-32600, message="this server speaks 2026-07-28 only"))))
                        continue
                    await send.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(gate)
            await low.run(receive, write, low.create_initialization_options())
            group.cancel_scope.cancel()


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    db, era = sys.argv[1:3]
    if "--http" in sys.argv[3:]:
        gate = legacy_only_http.refused if era == LEGACY else modern_only_http.refused
        legacy_only_http.run(gate, outbox_server.build(db))
    else:
        anyio.run(stdio, db, era)
