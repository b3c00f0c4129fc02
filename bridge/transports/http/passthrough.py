"""Answers the pipeline need not read, and the pieces every relayed answer shares: the upstream's
end-to-end headers, and headers that leave with the first bytes."""
from __future__ import annotations

import aiohttp
from aiohttp import web

from bridge.transports.forwarding import HOP_BY_HOP, end_to_end


def response_headers(upstream: aiohttp.ClientResponse) -> dict[str, str]:
    return end_to_end(upstream.headers, HOP_BY_HOP)


class Relayed(web.StreamResponse):
    """A streamed answer whose headers leave with its first bytes, in one write instead of two
    (aiohttp ≥ 3.10 holds them when asked; an older one sends them at `prepare`, as before)."""

    _send_headers_immediately = False


async def start_relay(request: web.Request, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> bytes:
    """Prepare ``response`` and return what of the upstream's body has already arrived. With
    nothing yet, the headers leave now: a host waits for them (an idle GET stream must open)."""
    await response.prepare(request)
    first = upstream.content.read_nowait()
    if not first:
        await response.write(b"")
    return first


async def stream_raw(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """Anything the pipeline need not read (GET, DELETE, 202s, 405s, binary bodies): bytes as they come."""
    response = Relayed(status=upstream.status, headers=response_headers(upstream))
    if upstream.headers.get("content-length") is not None and "text/event-stream" not in upstream.headers.get(
            "content-type", ""):
        response.content_length = int(upstream.headers["content-length"])
    first = await start_relay(request, upstream, response)
    if first:
        await response.write(first)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response
