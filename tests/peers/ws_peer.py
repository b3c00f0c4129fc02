"""The bundled legacy MCP server behind a WebSocket (JSON-RPC text frames). A request for method
`test/close` makes the server close the connection with code 4001, to check close codes are
mirrored; `test/headers` answers with the headers of the WebSocket handshake the server received.
Prints `PORT <n>`."""
import asyncio
import json

import websockets

from bridge.examples.mcp_legacy_server import LegacyMcpServer


async def serve(ws) -> None:
    server = LegacyMcpServer()
    async for text in ws:
        msg = json.loads(text)
        if msg.get("method") == "test/headers":
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": msg.get("id"),
                                      "result": {"headers": dict(ws.request.headers.raw_items())}}))
            continue
        if msg.get("method") == "test/close":
            await ws.close(code=4001, reason="asked to close")
            return
        for reply in server.handle(msg):
            await ws.send(json.dumps(reply))


async def main() -> None:
    async with websockets.serve(serve, "127.0.0.1", 0) as server:
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
