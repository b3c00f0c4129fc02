"""A one-era front for a dual-era MCP server over Streamable HTTP: what the conformance suite's
reference server (which speaks both 2025-11-25 and 2026-07-28) would be if it had never moved, or
had moved and dropped the old era. It has no option for that, so the front refuses the other era's
traffic as a one-era server does and relays the rest unchanged (bytes, status, headers, as it
streams: SSE and the line-per-message `subscriptions/listen` body alike).

    python -m tests.conformance.front --era 2025-11-25 --upstream http://127.0.0.1:3000 --listen 127.0.0.1:3001

Which era a request belongs to is decided as the reference server decides which of its two paths
serves it (`stateless`): a POST with no `Mcp-Session-Id` and a version header or a `_meta` goes to
its 2026-07-28 path, unless it is a `_meta`-less request naming a session-era revision; the rest
(`initialize`, session traffic, GET and DELETE) to its 2025-11-25 path.

- ``2025-11-25`` refuses (400, -32600) what would reach the 2026-07-28 path.
- ``2026-07-28`` refuses (400, -32600) what would reach the 2025-11-25 path; GET and DELETE get
  405 (there is no session and no GET stream).

Each refusal is printed on stderr (`refused <method> <why>`), so a run shows whether anything of the
wrong era got through the bridge in front of it.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import aiohttp
from aiohttp import web

LEGACY, MODERN = "2025-11-25", "2026-07-28"
#: the revisions with a session: the reference server's `LEGACY_SESSION_PROTOCOL_VERSIONS`
SESSION_ERAS = ("2024-11-05", "2025-03-26", "2025-06-18", LEGACY)
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
                        "trailer", "content-length"})


def _messages(body: bytes) -> list[dict[str, Any]]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    items = parsed if isinstance(parsed, list) else [parsed]
    return [m for m in items if isinstance(m, dict)]


def stateless(headers: Any, body: bytes) -> bool:
    """Whether the reference server serves this POST on its 2026-07-28 path, as it decides it: no
    `Mcp-Session-Id`, and a version header or a `_meta`, unless it is a `_meta`-less request naming
    a session-era revision."""
    version = headers.get("MCP-Protocol-Version")
    meta = any(isinstance(m.get("params"), dict) and "_meta" in m["params"] for m in _messages(body))
    return (not headers.get("Mcp-Session-Id") and bool(version or meta)
            and not (not meta and version in SESSION_ERAS))


def refusal(era: str, method: str, headers: Any, body: bytes) -> tuple[int, str] | None:
    """Why a server of ``era`` alone refuses this request (status, reason), or None: what the
    reference server would serve on the other era's path."""
    if era == LEGACY:
        if method == "POST" and stateless(headers, body):
            return 400, f"a {MODERN} request (no session; a version header or _meta of that era)"
        return None
    if method in ("GET", "DELETE"):
        return 405, f"{method}: a {MODERN} server has no session and no GET stream"
    if method == "POST" and not stateless(headers, body):
        return 400, f"a {LEGACY} request (a session, initialize, or no {MODERN} version header or _meta)"
    return None


def app(era: str, upstream: str) -> web.Application:
    client: dict[str, aiohttp.ClientSession] = {}

    async def start(_app: web.Application) -> None:
        client["s"] = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))

    async def stop(_app: web.Application) -> None:
        await client["s"].close()

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        refused = refusal(era, request.method, request.headers, body)
        if refused is not None:
            status, why = refused
            ids = [m.get("id") for m in _messages(body) if "id" in m]
            methods = ",".join(str(m.get("method")) for m in _messages(body)) or request.method
            print(f"refused {methods} {why}", file=sys.stderr, flush=True)
            if status == 405:
                return web.Response(status=405, headers={"Allow": "POST"})
            return web.json_response({"jsonrpc": "2.0", "id": ids[0] if ids else None,
                                      "error": {"code": -32600, "message": f"this server speaks {era} only: {why}"}},
                                     status=status)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with client["s"].request(request.method, upstream + request.path_qs, headers=headers,
                                       data=body if body else None, allow_redirects=False) as answer:
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            for key, value in answer.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    response.headers.add(key, value)
            if "Content-Length" in answer.headers:
                response.content_length = int(answer.headers["Content-Length"])
            await response.prepare(request)
            try:
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionResetError, aiohttp.ClientError):
                pass  # either side went away mid-stream: a listen or GET stream ends so
            return response

    application = web.Application(client_max_size=16 << 20)
    application.on_startup.append(start)
    application.on_cleanup.append(stop)
    application.router.add_route("*", "/{tail:.*}", relay)
    return application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--era", choices=(LEGACY, MODERN), required=True)
    parser.add_argument("--upstream", required=True, help="the dual-era server, e.g. http://127.0.0.1:3000")
    parser.add_argument("--listen", default="127.0.0.1:0")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    web.run_app(app(args.era, args.upstream.rstrip("/")), host=host, port=int(port), print=None)


if __name__ == "__main__":
    main()
