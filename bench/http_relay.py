"""The floor for an HTTP proxy built like reminder-bridge serve: a bare aiohttp reverse proxy
(aiohttp server in, one pooled aiohttp client session out, body read whole, headers copied),
with no pipeline, no routes and no header rules.  Prints `PORT <n>`.

Usage: python -m bench.http_relay UPSTREAM_URL
"""
import asyncio
import sys

import aiohttp
from aiohttp import web

SKIP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


async def main(upstream: str) -> None:
    client: aiohttp.ClientSession | None = None

    async def relay(request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in SKIP}
        async with client.request(request.method, upstream + request.path_qs, data=body, headers=headers) as answer:
            data = await answer.read()
            return web.Response(status=answer.status, body=data, headers={
                k: v for k, v in answer.headers.items() if k.lower() not in SKIP})

    async def start(_: web.Application) -> None:
        nonlocal client
        client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
                                       cookie_jar=aiohttp.DummyCookieJar())

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", relay)
    app.on_startup.append(start)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    from bridge.loop import run

    run(main(sys.argv[1].rstrip("/")))
