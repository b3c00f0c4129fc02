"""The A2A agent card, fetched from the agent and served with its URLs pointing at the proxy and
an ETag of the proxy's own; what the card declares seeds the route's later requests."""
from __future__ import annotations

import asyncio
import hashlib
import json

import aiohttp
from aiohttp import web

from bridge.jsonrpc import dumps
from bridge.pipeline.commands import CardFlow
from bridge.transports.forwarding import redact
from bridge.transports.guard import Holding
from bridge.transports.http.bodies import TooLarge, read_answer
from bridge.transports.http.own_calls import OwnCalls
from bridge.transports.http.passthrough import response_headers
from bridge.transports.http.routes import HttpRoute
from bridge.transports.http.upstream_errors import cause

#: where an A2A agent publishes its card (both names the spec has used)
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


async def agent_card(proxy: OwnCalls, route: HttpRoute, request: web.Request, holding: Holding) -> web.StreamResponse:
    assert proxy.client is not None
    url = route.upstream_url(request)
    headers = proxy.upstream_headers(route, request)
    etag_asked = None
    for name in [k for k in headers if k.lower() == "if-none-match"]:
        etag_asked = headers.pop(name)  # the caller holds the proxy's ETag, not the upstream's
    try:
        async with proxy.client.get(url, headers=headers) as upstream:
            data = await read_answer(upstream, holding, proxy.limits)
            headers = response_headers(upstream)
            status = upstream.status
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, TooLarge) as exc:
        return web.Response(status=502, text=f"reminder-bridge: route {route.name!r}: upstream "
                                             f"{redact(url)}: {route.shown(cause(exc))}\n")
    flow = route.new_flow()  # the card is read afresh: what it declares seeds later requests
    try:
        card = json.loads(data)
    except (ValueError, RecursionError):
        return web.Response(status=status, body=data, headers=headers)
    if not isinstance(flow, CardFlow):  # a route whose protocol has no card: it goes as it came
        return web.Response(status=status, body=data, headers=headers)
    rewritten = flow.rewrite_card(card, lambda u: route.to_proxy(u, request))
    route.learn(flow)
    if rewritten is None or status != 200:
        return web.Response(status=status, body=data, headers=headers)
    body = dumps(rewritten)
    # a different body: the upstream's validators no longer name it; the proxy's own ETag does
    for name in [k for k in headers if k.lower() in ("etag", "content-md5", "digest", "content-digest")]:
        del headers[name]
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers["ETag"] = etag
    if etag_asked is not None and etag in (t.strip() for t in etag_asked.split(",")):
        return web.Response(status=304, headers={k: v for k, v in headers.items()
                                                 if k.lower() not in ("content-type", "content-length")})
    return web.Response(status=status, body=body, headers=headers)
