"""An MCP Streamable HTTP server (2026-07-28 style: no session) that misbehaves on request, for the
fault suite.  POST /mcp, by JSON-RPC method:

  ping, tools/call   answered at once (tools/call echoes `arguments.text`)
  login {user}       answered with a `session` cookie; whoami answers with the Cookie header it got
  compressed         a large result, compressed if the request's Accept-Encoding allows it
  slow {seconds}     answered after that long
  held               answered once the gate opens (below)
  hang               never answered
  unanswered         an SSE answer with one progress notification that ends without the result
  stream {count, interval, held}
                     an SSE answer: `count` progress notifications `interval` s apart, then the result;
                     with `held`, the notifications after the first wait for the gate
  hostile {kind, as} answers with hostile bytes (see HOSTILE) as a JSON body (`as` = "json") or
                     as one SSE event (`as` = "sse"), then, for SSE, the real result; any other
                     method whose params name a `kind` of HOSTILE is answered the same way
  initialize         a 2025-11-25 result declaring legacy reminders, with a fresh `Mcp-Session-Id`
                     (any session id is accepted afterwards, as by a server the proxy restarted in
                     front of)
  remind {count, size, id}
                     an SSE answer: `count` legacy reminders (dedupe keys k0, k1, …), then the result;
                     `size`: each body padded to that many characters; `id`: the ids' prefix
  resources/read     an SSE answer: one legacy reminder (body: the `uri`), then the result
  headers            the request's headers, path and query string, as the result
  hopheaders         a result whose response names `X-Up-Hop` in `Connection`
  bigevent {size}    an SSE answer whose first event carries `size` bytes, then the result
  bigjson {size}     a JSON result padded to `size` bytes

POST /a2a is a standard A2A agent for id-collision tests: `SendMessage` answers with the task
`task-<first text part>` (once the gate opens when that text starts with "held"); `InjectTaskReminder`
is recorded.

The gate lets a test hold requests at the upstream for as long as it needs them in flight: GET
/release opens it (for good). GET /stats gives {"injects": [[taskId, body], ...], "held": n}, n the
requests waiting at the gate now (`stats_of`, `held_at`, `open_gate` below are the client side).

GET /mcp opens a server stream (keep-alive comments) that lasts until the client leaves.
GET /.well-known/agent-card.json is an A2A card with a strong ETag and an interface URL without a
trailing slash.  Bodies that are not JSON get a 400.  `--port N` listens on a fixed port (so a
test can restart it where the proxy expects it).  Prints `PORT <n>`.
"""
import argparse
import asyncio
import json
import uuid

from aiohttp import web

from tests.peers.processes import get_json

REMINDER = {"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "logger": "harn.reminder", "data": "x", "_meta": {"harn": {"reminder": {"id": "r", "body": "x"}}}}}
DEEP = 10_000
HOSTILE = {
    "utf8": b'{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":"harn.reminder",'
            b'"data":"\xff\xfe","_meta":{"harn":{"reminder":{"id":"\xc3\x28","body":"\xff"}}}}}',
    "deep": b'{"jsonrpc":"2.0","method":"notifications/reminder","params":{"reminder":' + b'{"a":' * DEEP + b"1"
            + b"}" * DEEP + b"}}",
    "numbers": b'{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":"harn.reminder","data":1e999,'
               b'"_meta":{"harn":{"reminder":{"id":"r","body":"b","ttlTurns":' + b"9" * 5000 + b"}}}}}",
    "duplicate": b'{"jsonrpc":"2.0","method":"notifications/reminder","method":"notifications/message",'
                 b'"params":{"reminder":{"body":"a"},"reminder":{"body":"b","body":""}}}',
    "truncated": b'{"jsonrpc":"2.0","method":"notifications/message","params":{"_meta":{"harn":{"reminder":',
    "reminder": json.dumps(REMINDER).encode(),
    "badid": b'{"jsonrpc":"2.0","id":[],"result":{"reminders":[]}}',
    "badbody": json.dumps({**REMINDER, "params": {**REMINDER["params"], "_meta": {"harn": {"reminder": {
        "id": "r", "body": {"secret": "B0DY-s3cr3t"}}}}}}).encode(),
}


def legacy_reminder(body: str, key: str | None = None, reminder_id: str | None = None) -> bytes:
    reminder = {"id": reminder_id or str(uuid.uuid4()), "body": body, **({"dedupeKey": key} if key else {})}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body, "_meta": {"harn": {"reminder": reminder}}}}).encode()


CAPABILITIES = {"tools": {}, "resources": {}, "_meta": {"harn": {"reminders": {"emit": True}}}}


async def sse(request: web.Request, events: list[bytes]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for data in events:
        await response.write(b"event: message\ndata: " + data + b"\n\n")
    await response.write_eof()
    return response


def make_app() -> web.Application:
    injects: list[list[str]] = []
    gate = asyncio.Event()
    waiting = [0]  # requests at the gate now

    async def at_gate() -> None:
        waiting[0] += 1
        try:
            await gate.wait()
        finally:
            waiting[0] -= 1

    async def a2a(request: web.Request) -> web.Response:
        msg = json.loads(await request.read())
        params = msg.get("params") or {}
        if msg.get("method") == "InjectTaskReminder":
            injects.append([params.get("taskId"), (params.get("reminder") or {}).get("body")])
            answer = {"reminderId": (params.get("reminder") or {}).get("id", "r"), "dedupedCount": 0,
                      "acceptedAt": "2026-01-01T00:00:00.000Z"}
        else:
            text = ((params.get("message") or {}).get("parts") or [{}])[0].get("text", "")
            if text.startswith("held"):
                await at_gate()
            answer = {"task": {"id": f"task-{text}", "contextId": "ctx",
                               "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}
        return web.json_response({"jsonrpc": "2.0", "id": msg.get("id"), "result": answer})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"injects": injects, "held": waiting[0]})

    async def release(_: web.Request) -> web.Response:
        gate.set()
        return web.json_response({"open": True})

    async def post(request: web.Request) -> web.StreamResponse:
        try:
            msg = json.loads(await request.read())
        except (ValueError, RecursionError):
            return web.Response(status=400, text="not JSON")
        if not isinstance(msg, dict) or "id" not in msg:
            return web.Response(status=202)
        method, params, msg_id = msg.get("method"), msg.get("params") or {}, msg["id"]
        if isinstance(params, dict) and params.get("kind") in HOSTILE:
            method = "hostile"  # any method (an initialize, say) can get a hostile answer

        def result(value: dict) -> bytes:
            return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": value}).encode()

        if method == "initialize":
            return web.Response(body=result({"protocolVersion": "2025-11-25", "capabilities": CAPABILITIES,
                                             "serverInfo": {"name": "faulty", "version": "1"}}),
                                content_type="application/json", headers={"Mcp-Session-Id": uuid.uuid4().hex})
        if method == "remind":
            count, size, prefix = int(params.get("count", 1)), int(params.get("size", 0)), params.get("id")
            return await sse(request, [legacy_reminder(f"reminder {i}".ljust(size, "x"), f"k{i}",
                                                       f"{prefix}{i}" if prefix else None) for i in range(count)]
                             + [result({"content": [{"type": "text", "text": "reminded"}]})])
        if method == "resources/read":
            uri = str(params.get("uri", "file:///x"))
            return await sse(request, [legacy_reminder(uri), result({"contents": []})])
        if method == "headers":
            return web.Response(body=result({"headers": dict(request.headers), "path": request.path,
                                             "query": request.query_string}), content_type="application/json")
        if method == "hopheaders":
            return web.Response(body=result({}), content_type="application/json",
                                headers={"Connection": "X-Up-Hop", "X-Up-Hop": "hop-secret", "X-Kept": "kept"})
        if method == "bigevent":
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"pad": "x" * int(params["size"])}}
            return await sse(request, [json.dumps(note).encode(), result({"done": True})])
        if method == "unanswered":
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 0}}
            return await sse(request, [json.dumps(note).encode()])
        if method == "bigjson":
            return web.Response(body=result({"pad": "x" * int(params["size"])}), content_type="application/json")
        if method == "login":  # a session cookie for whoever logged in
            response = web.Response(body=result({}), content_type="application/json")
            response.set_cookie("session", str(params.get("user", "someone")))
            return response
        if method == "compressed":  # compressed whenever the request allows it (as nginx or a gzip middleware would)
            response = web.Response(body=result({"acceptEncoding": request.headers.get("Accept-Encoding"),
                                                  "pad": "x" * 4000}), content_type="application/json")
            response.enable_compression()
            return response
        if method == "whoami":
            return web.Response(body=result({"cookie": request.headers.get("Cookie")}), content_type="application/json")
        if method == "slow":
            await asyncio.sleep(float(params.get("seconds", 1)))  # a slow upstream is the behaviour asked for
        elif method == "held":
            await at_gate()
        elif method == "hang":
            await asyncio.sleep(3600)
        elif method in ("stream", "hostile") and (method == "stream" or params.get("as") == "sse"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await response.prepare(request)
            if method == "stream":
                for i in range(int(params.get("count", 10))):
                    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}}
                    await response.write(b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n")
                    if i == 0 and params.get("held"):
                        await at_gate()
                    await asyncio.sleep(float(params.get("interval", 0.1)))  # the stream's pace, asked for
            else:
                await response.write(b"event: message\ndata: " + HOSTILE[params["kind"]] + b"\n\n")
            await response.write(b"event: message\ndata: " + result({"done": True}) + b"\n\n")
            await response.write_eof()
            return response
        elif method == "hostile":
            return web.Response(body=HOSTILE[params["kind"]], content_type="application/json")
        text = ((params.get("arguments") or {}).get("text")) if method == "tools/call" else None
        return web.Response(body=result({"content": [{"type": "text", "text": text}]} if text is not None else {}),
                            content_type="application/json")

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        while True:
            await response.write(b": keep-alive\n\n")
            await asyncio.sleep(0.2)  # a keep-alive pace (behaviour, not synchronisation)

    async def card(request: web.Request) -> web.Response:
        host = f"http://{request.host}"
        body = {"name": "faulty", "version": "1", "capabilities": {"streaming": True},
                "supportedInterfaces": [{"url": host, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}
        return web.json_response(body, headers={"ETag": '"card-v1"'})

    app = web.Application(client_max_size=1024 * 1024 * 1024)
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", stream)
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/a2a", a2a)
    app.router.add_get("/stats", stats)
    app.router.add_get("/release", release)
    return app


async def stats_of(port: int) -> dict:
    """What the upstream on ``port`` saw: its `/stats`."""
    return await get_json(port, "/stats")


async def held_at(port: int, n: int) -> bool:
    """Whether ``n`` requests wait at the gate of the upstream on ``port`` (in flight there, unanswered)."""
    return (await stats_of(port))["held"] == n


async def open_gate(port: int) -> None:
    """Open the gate of the upstream on ``port``: every held request is answered."""
    assert await get_json(port, "/release") == {"open": True}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    runner = web.AppRunner(make_app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, reuse_address=True)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
