"""An MCP 2025-11-25 server built with the official SDK that supports SSE resumption (SEP-1699):
an event store keeps every event it sends, and a client that comes back with `Last-Event-ID`
gets the rest of the stream replayed.

    python -m tests.peers.resumable_mcp_server

`interrupted {text}` closes its own SSE stream mid-call (as the conformance suite's
`test_reconnection` tool does), then logs once more and answers: the answer reaches only a
client that resumes the stream.  `/seen` lists every request that reached the server, with its
headers, so a test sees exactly what a proxy forwarded; `/answered` the ids of the requests whose
answers the event store holds (a client that resumes after that gets them replayed: the SDK's
live tail after a replay can miss an event stored during the replay).  Prints `PORT <n>`.
"""
from __future__ import annotations

import itertools
import socket
import warnings
from typing import Any

import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from starlette.responses import JSONResponse

#: what the server asks clients to wait before reconnecting (the SSE `retry` field), in ms
RETRY_MS = 100


class MemoryEventStore(EventStore):
    """Every event of every stream, in order, for replay after an event id."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"e{next(self._ids)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = next((i for i, (event_id, _, _) in enumerate(self.events) if event_id == last_event_id), None)
        if found is None:
            return None
        stream_id = self.events[found][1]
        for event_id, stream, message in self.events[found + 1:]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id

    def answered(self) -> list[Any]:
        return [m.id for _, _, m in self.events if isinstance(m, JSONRPCResponse | JSONRPCError)]


def build() -> MCPServer:
    server = MCPServer("resumable")

    @server.tool()
    async def interrupted(text: str, ctx: Context) -> str:
        """Close this call's SSE stream, then answer: only a resumed stream gets the answer."""
        await ctx.info("before the stream closed")
        await ctx.close_sse_stream()
        await ctx.info("after the stream closed")
        return text

    return server


def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging is fine at 2025-11-25
    store = MemoryEventStore()
    sdk = build().streamable_http_app(event_store=store, retry_interval=RETRY_MS)
    seen: list[dict[str, Any]] = []

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/seen":
            return await JSONResponse(seen)(scope, receive, send)
        if scope["type"] == "http" and scope["path"] == "/answered":
            return await JSONResponse(store.answered())(scope, receive, send)
        if scope["type"] == "http":
            seen.append({"method": scope["method"],
                         "headers": {k.decode().lower(): v.decode() for k, v in scope["headers"]}})
        return await sdk(scope, receive, send)

    print(f"PORT {port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
