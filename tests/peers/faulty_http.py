"""An MCP Streamable HTTP server (2026-07-28 style: no session) that misbehaves on request, for the
fault suite.  POST /mcp, by JSON-RPC method:

  ping, tools/call   answered at once (tools/call echoes `arguments.text`)
  login {user}       answered with a `session` cookie; whoami answers with the Cookie header it got
  compressed         a large result, compressed if the request's Accept-Encoding allows it
  slow {seconds}     answered after that long
  hang               never answered
  stream {count, interval}
                     an SSE answer: `count` progress notifications `interval` s apart, then the result
  hostile {kind, as} answers with hostile bytes (see HOSTILE) as a JSON body (`as` = "json") or
                     as one SSE event (`as` = "sse"), then, for SSE, the real result; any other
                     method whose params name a `kind` of HOSTILE is answered the same way

Bodies that are not JSON get a 400.  `--port N` listens on a fixed port (so a test can restart
it where the proxy expects it).  Prints `PORT <n>`.
"""
import argparse
import asyncio
import json

from aiohttp import web

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
}


def make_app() -> web.Application:
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
            await asyncio.sleep(float(params.get("seconds", 1)))
        elif method == "hang":
            await asyncio.sleep(3600)
        elif method in ("stream", "hostile") and (method == "stream" or params.get("as") == "sse"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await response.prepare(request)
            if method == "stream":
                for i in range(int(params.get("count", 10))):
                    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}}
                    await response.write(b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n")
                    await asyncio.sleep(float(params.get("interval", 0.1)))
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

    app = web.Application(client_max_size=1024 * 1024 * 1024)
    app.router.add_post("/mcp", post)
    return app


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
