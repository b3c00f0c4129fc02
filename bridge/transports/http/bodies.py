"""Request and answer bodies read whole, within `max_body_bytes`, `max_response_bytes`, the memory
budget and `body_timeout_s`: one place decides what is too large or too slow, and how the host is told."""
from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from bridge.rules import Limits
from bridge.transports.guard import Guard, Holding
from bridge.transports.http.routes import HttpRoute


class Refused(Exception):
    """A request the proxy answers itself with an HTTP error (sizes, budgets, timeouts)."""

    def __init__(self, status: int, text: str, reason: str, retry_after: int | None = None, close: bool = False):
        self.status, self.text, self.reason, self.retry_after, self.close = status, text, reason, retry_after, close
        super().__init__(text)

    def response(self) -> web.Response:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        response = web.Response(status=self.status, text=f"reminder-bridge: {self.text}\n", headers=headers)
        if self.close:
            response.force_close()
        return response


class TooLarge(Exception):
    """An upstream answer over `max_response_bytes`, or more than the memory budget has room for."""

    def __init__(self, text: str, status: int = 502):
        self.status = status
        super().__init__(text)


async def read_body(route: HttpRoute, request: web.Request, holding: Holding, limits: Limits,
                    guard: Guard) -> bytes:
    """The request body, within `max_body_bytes`, the memory budget and `body_timeout_s`."""
    if not request.body_exists:
        return b""
    length = request.content_length
    if length is not None and length > limits.max_body_bytes:
        route.recorder.request_refused("max_body_bytes")
        raise Refused(413, f"request body of {length} bytes is over max_body_bytes = {limits.max_body_bytes}",
                      "max_body_bytes")
    if length is not None and not holding.take(length):
        raise over_budget(route, limits)
    content = request.content
    if length is not None and content.is_eof():  # all of it came with the headers: no waiting, no timer
        return content.read_nowait()
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            async for chunk in content.iter_any():
                size += len(chunk)
                if size > limits.max_body_bytes:
                    route.recorder.request_refused("max_body_bytes")
                    raise Refused(413, f"request body over max_body_bytes = {limits.max_body_bytes}",
                                  "max_body_bytes")
                if length is None and not holding.take(len(chunk)):
                    raise over_budget(route, limits)
                chunks.append(chunk)
    except TimeoutError:
        guard.timeouts.labels("body").inc()
        raise Refused(408, f"request body not received within body_timeout_s = {limits.body_timeout_s:g}",
                      "body_timeout", close=True) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def over_budget(route: HttpRoute, limits: Limits) -> Refused:
    route.recorder.request_refused("max_inflight_bytes")
    route.recorder.warning("memory_budget_full", max_inflight_bytes=limits.max_inflight_bytes,
                           why="requests in flight hold the whole budget; this one is refused with 503")
    return Refused(503, f"the proxy holds max_inflight_bytes = {limits.max_inflight_bytes} of requests "
                        f"in flight; retry shortly", "max_inflight_bytes", retry_after=1)


async def read_answer(upstream: aiohttp.ClientResponse, holding: Holding, limits: Limits,
                      release: bool = False) -> bytes:
    """An upstream answer read whole, within `max_response_bytes` and the memory budget."""
    limit = limits.max_response_bytes
    if upstream.content_length is not None and upstream.content_length > limit:
        raise TooLarge(f"the upstream's answer of {upstream.content_length} bytes is over "
                       f"max_response_bytes = {limit}")
    if upstream.content_length is not None:  # bounded by its length: taken from the budget at once
        try:
            if not holding.take(upstream.content_length):
                raise TooLarge(f"the proxy holds max_inflight_bytes = {limits.max_inflight_bytes} of "
                               f"requests in flight; retry shortly", status=503)
            return await upstream.read()
        finally:
            if release:
                holding.release()
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in upstream.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the upstream's answer is over max_response_bytes = {limit}")
            if not holding.take(len(chunk)):
                raise TooLarge(f"the proxy holds max_inflight_bytes = {limits.max_inflight_bytes} of "
                               f"requests in flight; retry shortly", status=503)
            chunks.append(chunk)
    finally:
        if release:
            holding.release()
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
