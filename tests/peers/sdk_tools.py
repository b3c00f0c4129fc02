"""What the MCP SDK test servers share: Harn's legacy reminder as a `notifications/message`, and the
`echo` and `remind` tools (a reminder on the call's own stream, then the answer)."""
from __future__ import annotations

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def harn_reminder(path: str, tags: tuple[str, ...] = ("workspace",)) -> types.LoggingMessageNotification:
    body = f"{path} changed externally; re-read it before editing."
    meta = {"harn": {"reminder": {"id": f"r-{path}", "body": body, "tags": list(tags),
                                  "dedupeKey": f"file_changed:{path}", "ttlTurns": 2}}}
    return types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams(
        level="info", logger="harn.reminder", data=body, _meta=meta))


def add_echo_and_remind(server: MCPServer, tags: tuple[str, ...] = ("workspace",)) -> None:
    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    async def remind(path: str, ctx: Context) -> str:
        """A legacy reminder on this call's stream, then the answer."""
        await ctx.session.send_notification(harn_reminder(path, tags), related_request_id=ctx.request_id)
        return f"touched {path}"
