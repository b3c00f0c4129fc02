"""A real OTLP/HTTP trace receiver on a socket, in its own thread: every export request it got,
parsed with the OTLP protobuf messages. Shared by the exporter's unit and end-to-end tests."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    """(the `/v1/traces` URL, the requests received so far)."""
    got: list[ExportTraceServiceRequest] = []
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    state: dict = {}

    async def traces(request: web.Request) -> web.Response:
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415)
        got.append(ExportTraceServiceRequest.FromString(await request.read()))
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def start() -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/traces", traces)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"], state["port"] = runner, runner.addresses[0][1]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the OTLP receiver did not start")
    try:
        yield f"http://127.0.0.1:{state['port']}/v1/traces", got
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def spans_of(requests: list[ExportTraceServiceRequest]) -> list:
    return [span for request in requests for resource in request.resource_spans
            for scope in resource.scope_spans for span in scope.spans]
