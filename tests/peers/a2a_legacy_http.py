"""The A2A example agent over HTTP (`bridge.examples.a2a_legacy_http`), plus `/stats`: the
reminders each task received. Prints `PORT <n>: …` when listening.

Usage: python -m tests.peers.a2a_legacy_http
"""
import argparse
import sys

from aiohttp import web

from bridge.examples._http import serve_app
from bridge.examples.a2a_legacy_http import AGENT, make_app


def make_test_app() -> web.Application:
    app = make_app()

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"reminders": app[AGENT].received_reminders})

    app.router.add_get("/stats", stats)
    return app


if __name__ == "__main__":
    sys.exit(serve_app(argparse.ArgumentParser(), lambda _: make_test_app(), "a2a test agent at {url}"))
