"""Run an example server's aiohttp app from the command line: `--host`, `--port`, and one line
saying where it listens (`PORT <n>: …`, which the tests read too)."""
from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

from aiohttp import web


def serve_app(parser: argparse.ArgumentParser, make: Callable[[argparse.Namespace], web.Application],
              what: str) -> int:
    """Parse `--host`/`--port` (and ``parser``'s own options), serve ``make(args)`` until stopped.
    ``what`` names the server and its URL: `what.format(url=…)`."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free one, printed)")
    args = parser.parse_args()

    async def run() -> None:
        runner = web.AppRunner(make(args), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, args.host, args.port).start()
        port = runner.addresses[0][1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"PORT {port}: {what.format(url=f'http://{host}:{port}')}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0
