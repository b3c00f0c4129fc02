"""tests.peers.legacy_only_server's tools, resource and prompt over Streamable HTTP, 2026-07-28 only:
the SDK's app behind a gate (tests.peers.legacy_only_http's) that refuses (400, -32600) whatever a
server that never had sessions does not take (a GET or a DELETE gets 405): a POST without
`MCP-Protocol-Version: 2026-07-28`, `initialize`, `notifications/initialized`, and a request
without the per-request `_meta` envelope.

    python -m tests.peers.modern_only_http

It has two tools more: `steps {count}` reports its progress `count` times (the call's progress
token), then answers; `approve` asks its client for an approval through the SDK's resolver
(`elicitation/create`, at 2026-07-28 an `input_required` result) and answers with it.

`/seen` lists every request that reached it (method, lower-case headers, body). Prints `PORT <n>`.
"""
from __future__ import annotations

import json
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, Resolve
from pydantic import BaseModel

from tests.peers import legacy_only_http
from tests.peers.legacy_only_server import TOOLS, build
from tests.peers.modern_only_server import refused as refused_message

MODERN = "2026-07-28"
#: the tools it lists: legacy_only_server's and its own two
MODERN_TOOLS = TOOLS | {"steps", "approve"}


def refused(method: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why a 2026-07-28-only server refuses a request (None: it takes it)."""
    if method != "POST":
        return "this server speaks 2026-07-28 only: no session, no GET stream"
    if headers.get("mcp-protocol-version") != MODERN:
        return f"this server speaks 2026-07-28 only: MCP-Protocol-Version {headers.get('mcp-protocol-version')}"
    try:
        msg = json.loads(body)
    except ValueError:
        return None  # the SDK's own parse error
    return "this server speaks 2026-07-28 only" if isinstance(msg, dict) and refused_message(msg) else None


class Approval(BaseModel):
    ok: bool


def approval() -> Elicit[Approval]:
    """`approve`'s resolver (module level: the SDK reads its annotation by name)."""
    return Elicit("Go ahead?", Approval)


def server() -> MCPServer:
    built = build()

    @built.tool()
    def approve(answer: Annotated[ElicitationResult[Approval], Resolve(approval)]) -> str:
        if isinstance(answer, AcceptedElicitation):
            return f"approved: {answer.data.ok}"
        return f"not approved: {answer.action}"

    @built.tool()
    async def steps(count: int, ctx: Context) -> str:
        for step in range(1, count + 1):
            await ctx.report_progress(step, count, f"step {step}")
        return f"{count} steps"

    return built


if __name__ == "__main__":
    legacy_only_http.run(refused, server())
