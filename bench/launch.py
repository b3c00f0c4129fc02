"""Run `reminder-bridge` (or the bare relay) on uvloop's event loop instead of asyncio's:
`python -m bench.launch bridge|relay|http_relay ARGS`.

The proxy itself runs on the standard asyncio loop; `python -m bench --uvloop` uses this launcher
for every proxy and relay process to measure what an optional uvloop would change (uvloop must
be installed: `pip install uvloop`).
"""
import asyncio
import sys

import uvloop

asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

if __name__ == "__main__":
    what, sys.argv = sys.argv[1], [sys.argv[0], *sys.argv[2:]]
    if what == "http_relay":
        from bench.http_relay import main as http_relay

        raise SystemExit(asyncio.run(http_relay(sys.argv[1].rstrip("/"))))
    if what == "relay":
        from bench.relay import main as relay

        args = sys.argv[1:]
        raise SystemExit(asyncio.run(relay(args[1:] if args[:1] == ["--"] else args)))
    from bridge.cli import main

    raise SystemExit(main())
