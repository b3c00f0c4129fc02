"""tests.peers.legacy_only_server's tools, resource and prompt over Streamable HTTP, 2026-07-28 only:
the SDK's dual-era app behind a gate (tests.peers.legacy_only_http's) that refuses every POST
without `MCP-Protocol-Version: 2026-07-28`, every request without the per-request `_meta`
envelope (`initialize` among them), `notifications/initialized`, and GET and DELETE (a
2026-07-28 server keeps no session), as a server that speaks only 2026-07-28 behaves.

    python -m tests.peers.modern_gated_http

`/seen` lists every request that reached it (method, lower-case headers, body). Prints `PORT <n>`.
"""
from __future__ import annotations

import json

from tests.peers.legacy_only_http import MODERN, run
from tests.peers.modern_only_server import refused as refused_message


def refused(method: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why a 2026-07-28-only server refuses a request (None: it takes it)."""
    if method != "POST":
        return "this server speaks 2026-07-28 only: no session, no GET stream"
    if headers.get("mcp-protocol-version") != MODERN:
        return f"this server speaks 2026-07-28 only: MCP-Protocol-Version {headers.get('mcp-protocol-version')}"
    try:
        msg = json.loads(body)
    except ValueError:
        return None
    return "this server speaks 2026-07-28 only" if isinstance(msg, dict) and refused_message(msg) else None


if __name__ == "__main__":
    run(refused)
