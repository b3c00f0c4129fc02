"""Peers for the benchmarks, written by hand so each answers fast and the same way every time.

  python -m bench.peers mcp-http      MCP Streamable HTTP (2025-11-25): initialize gives a session,
                                      tools/call answers as JSON, except tool `flood` {count}: an SSE
                                      stream of `count` legacy reminders, then the result; a request
                                      with `MCP-Protocol-Version: 2026-07-28` is answered with no
                                      session, as 2026-07-28 (`server/discover`, `resultType`);
                                      prints `PORT <n>`
  python -m bench.peers a2a           A2A v1.0 JSON-RPC: SendStreamingMessage answers as SSE with a
                                      task, `params.metadata.events` status updates `interval` s apart
                                      (each stamped with the monotonic clock when sent), a last one
                                      that ends the turn; prints `PORT <n>`
  python -m bench.peers acp-none      an ACP agent over stdio with no reminder support
  python -m bench.peers mcp-flood     an MCP server over stdio that declares Harn reminders and, on
                                      `tools/call flood {rate, seconds, keys}`, sends legacy reminder
                                      notifications at `rate` per second, then answers (`{count}`:
                                      exactly that many); `tools/call echo {text}` answers at once
  python -m bench.peers otlp-sink     an OTLP/HTTP receiver that accepts and drops spans; prints `PORT <n>`

Only aiohttp (a dependency of the proxy) is needed.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid

JSON = "application/json"


# -- MCP Streamable HTTP --------------------------------------------------------------------------
def mcp_http_app():
    from aiohttp import web

    sessions: set[str] = set()

    async def post(request: web.Request) -> web.Response:
        msg = json.loads(await request.read())
        method = msg.get("method")
        if "id" not in msg:
            return web.Response(status=202)
        modern = request.headers.get("MCP-Protocol-Version") == "2026-07-28"
        if method == "initialize":
            session = uuid.uuid4().hex
            sessions.add(session)
            result = {"protocolVersion": "2025-11-25", "serverInfo": SERVER_INFO, "capabilities": CAPABILITIES}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result},
                                     headers={"Mcp-Session-Id": session})
        if modern and method == "server/discover":
            result = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": CAPABILITIES,
                      "ttlMs": 0, "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        if not modern and request.headers.get("Mcp-Session-Id") not in sessions:
            return web.json_response({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32600, "message": "Session not found"}}, status=404)
        if method == "tools/list":
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": TOOLS})
        if method == "tools/call" and (msg.get("params") or {}).get("name") == "flood":
            return await sse_flood(request, msg)
        if method == "tools/call":
            text = ((msg.get("params") or {}).get("arguments") or {}).get("text", "")
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {}
        if modern:
            result["resultType"] = "complete"
        body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, separators=(",", ":"))
        return web.Response(text=body, content_type=JSON)

    app = web.Application()
    app.router.add_post("/mcp", post)
    return app


SERVER_INFO = {"name": "bench", "version": "1"}
CAPABILITIES = {"tools": {}, "logging": {},
                "_meta": {"harn": {"reminders": {"emit": True, "propagate": ["session"], "roleHints": ["system"]}}}}
#: what `tools/list` answers (proxies that build their own tool list, like FastMCP's, ask for it)
TOOLS = {"tools": [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "flood", "inputSchema": {"type": "object", "properties": {
        "count": {"type": "integer"}, "rate": {"type": "number"}, "seconds": {"type": "number"},
        "keys": {"type": "integer"}}}}]}

#: one legacy reminder (Harn's shape, as a `notifications/message`), the same the stdio flood sends
REMINDER_LINE = ('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"harn.reminder",'
                 '"data":"Build %d failed; look before merging.","_meta":{"harn":{"reminder":{"id":"r-%d",'
                 '"body":"Build %d failed; look before merging.","tags":["ci"],"dedupe_key":"ci:%d",'
                 '"source":"stdlib_provider","authority":"advisory"}}}}}')


async def sse_flood(request, msg: dict):
    """`count` legacy reminders as SSE events, 100 to a write, then the call's result."""
    from aiohttp import web

    count = int(((msg.get("params") or {}).get("arguments") or {}).get("count", 10_000))
    events = [b"event: message\ndata: " + (REMINDER_LINE % (i, i, i, i % 1000)).encode() + b"\n\n"
              for i in range(min(count, 10_000))]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for start in range(0, count, 100):
        await response.write(b"".join(events[i % len(events)] for i in range(start, min(count, start + 100))))
    result = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": str(count)}]}}
    await response.write(b"event: message\ndata: " + json.dumps(result).encode() + b"\n\n")
    await response.write_eof()
    return response


# -- OTLP receiver -----------------------------------------------------------------------------------
def otlp_sink_app():
    """Accepts OTLP/HTTP export requests and drops them (an empty protobuf answer is a success)."""
    from aiohttp import web

    async def traces(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/traces", traces)
    return app


# -- A2A streaming ----------------------------------------------------------------------------------
def a2a_app():
    from aiohttp import web

    async def card(request: web.Request) -> web.Response:
        url = f"http://{request.host}/a2a"
        return web.json_response({"name": "bench", "description": "streams status updates", "version": "1",
                                  "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC",
                                                           "protocolVersion": "1.0"}],
                                  "capabilities": {"streaming": True}, "defaultInputModes": ["text/plain"],
                                  "defaultOutputModes": ["text/plain"], "skills": []})

    async def post(request: web.Request) -> web.StreamResponse:
        msg = json.loads(await request.read())
        params = msg.get("params") or {}
        if msg.get("method") != "SendStreamingMessage":
            return web.json_response({"jsonrpc": "2.0", "id": msg.get("id"),
                                      "error": {"code": -32601, "message": "Method not found"}})
        options = params.get("metadata") or {}
        count, interval = int(options.get("events", 10)), float(options.get("interval", 0.002))
        task, context = uuid.uuid4().hex, uuid.uuid4().hex
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def event(result: dict) -> None:
            frame = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
            await response.write(b"data: " + json.dumps(frame, separators=(",", ":")).encode() + b"\n\n")

        await event({"task": {"id": task, "contextId": context, "status": {"state": "TASK_STATE_SUBMITTED"}}})
        for i in range(count):
            await asyncio.sleep(interval)
            await event({"statusUpdate": {"taskId": task, "contextId": context,
                                          "status": {"state": "TASK_STATE_WORKING"},
                                          "metadata": {"seq": i, "sentNs": time.monotonic_ns()}}})
        await event({"statusUpdate": {"taskId": task, "contextId": context,
                                      "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/a2a", post)
    return app


async def serve_http(app) -> None:
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


# -- stdio peers ------------------------------------------------------------------------------------
def send(msg: dict) -> None:
    os.write(1, json.dumps(msg, separators=(",", ":")).encode() + b"\n")


def acp_none() -> None:
    """ACP agent without reminder support: sessions and prompts, nothing else."""
    sessions = 0
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": False},
                      "agentInfo": {"name": "bench-acp", "version": "1"}, "authMethods": []}
        elif method == "session/new":
            sessions += 1
            result = {"sessionId": f"s{sessions}"}
        elif method == "session/prompt":
            result = {"stopReason": "end_turn"}
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def mcp_flood() -> None:
    """An MCP server that floods its host with legacy reminders on request."""
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": msg_id, "result": {
                "protocolVersion": "2025-11-25", "serverInfo": {"name": "flood", "version": "1"},
                "capabilities": {"tools": {}, "_meta": {"harn": {"reminders": {
                    "emit": True, "propagate": ["session"], "roleHints": ["system"]}}}}}})
        elif method == "tools/call" and ((msg.get("params") or {}).get("name")) == "echo":
            text = ((msg.get("params") or {}).get("arguments") or {}).get("text", "")
            send({"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "tools/call":
            args = (msg.get("params") or {}).get("arguments") or {}
            if "count" in args:  # exactly `count` reminders, then the answer
                os.write(1, "".join(REMINDER_LINE % (i, i, i, i) + "\n" for i in range(int(args["count"]))).encode())
                sent = {"sent": int(args["count"])}
            else:
                sent = flood(float(args.get("rate", 100_000)), float(args.get("seconds", 1.0)),
                             int(args.get("keys", 100)))
            send({"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": str(sent)}],
                                                               "structuredContent": sent}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": msg_id, "result": TOOLS})
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "result": {}})


def flood(rate: float, seconds: float, keys: int) -> dict:
    """Legacy reminders at ``rate``/s in 1 ms batches, or as fast as the pipe takes them if slower
    (a blocked write is not made up for later).  Lines are prebuilt: the peer spends its time writing."""
    lines = [(REMINDER_LINE % (i, i, i, i % keys) + "\n").encode() for i in range(10_000)]
    batch = max(1, int(rate / 1000))
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - start < seconds:
        due = min(int((now - start) * rate) + batch, sent + 10 * batch)
        if sent >= due:
            time.sleep(0.0005)
            continue
        first = sent % len(lines)
        chunk = lines[first:first + due - sent]
        block = b"".join(chunk)
        view = memoryview(block)
        while view:
            view = view[os.write(1, view):]
        sent += len(chunk)
    elapsed = time.monotonic() - start
    return {"sent": sent, "seconds": round(elapsed, 3), "rate": round(sent / elapsed)}


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else ""
    if kind == "mcp-http":
        asyncio.run(serve_http(mcp_http_app()))
    elif kind == "a2a":
        asyncio.run(serve_http(a2a_app()))
    elif kind == "otlp-sink":
        asyncio.run(serve_http(otlp_sink_app()))
    elif kind == "acp-none":
        acp_none()
    elif kind == "mcp-flood":
        mcp_flood()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
