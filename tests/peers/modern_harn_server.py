"""A 2026-07-28 MCP server written with the official `mcp` SDK (`MCPServer`, Streamable HTTP) that
speaks Harn's legacy reminder dialect: `notifications/message` with `_meta.harn.reminder`, as a
Harn server would, declaring `capabilities._meta.harn.reminders`.

    python -m tests.peers.modern_harn_server

- `touch_file {path}`: a reminder that belongs to the request, on its own stream, then the result;
- `subscriptions/listen`: acknowledged with what the SDK honours (it knows nothing of `reminders`),
  then held open; `ping_listeners {body}` sends an ambient reminder on the newest open listen
  stream (the server's own notion of "whoever listens"), stamped with its subscription id.

Prints `PORT <n>: …` on stdout once it listens.
"""
from __future__ import annotations

import json
import socket
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types import (
    LoggingMessageNotification, LoggingMessageNotificationParams, SubscriptionFilter,
    SubscriptionsAcknowledgedNotification, SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams, SubscriptionsListenResult,
)

SUB = "io.modelcontextprotocol/subscriptionId"
REMINDERS = {"emit": True, "propagate": ["session"], "roleHints": ["system"]}

mcp = MCPServer("modern-harn", subscriptions=False)
#: open listen streams, oldest first: (session, subscription id, where to hand it reminders)
listeners: list[tuple[Any, Any, anyio.abc.ObjectSendStream]] = []


def harn(reminder: dict, meta: dict | None = None) -> LoggingMessageNotification:
    return LoggingMessageNotification(params=LoggingMessageNotificationParams(
        level="info", logger="harn.reminder", data=reminder["body"],
        _meta={**(meta or {}), "harn": {"reminder": reminder}}))


@mcp.tool()
async def touch_file(path: str, ctx: Context) -> str:
    reminder = {"id": f"touch-{path}", "body": f"{path} changed externally; re-read it before editing.",
                "tags": ["file"], "dedupeKey": f"file_changed:{path}", "ttlTurns": 2}
    await ctx.request_context.session.send_notification(harn(reminder), related_request_id=ctx.request_id)
    return f"touched {path}"


@mcp.tool()
async def ping_listeners(body: str) -> str:
    """An ambient reminder on the newest listen stream."""
    if not listeners:
        return "nobody listens"
    _, subscription, inbox = listeners[-1]
    await inbox.send({"id": f"amb-{body}", "body": body, "tags": ["ambient"], "dedupeKey": f"amb:{body}",
                      "ttlTurns": 1})
    return f"sent to {subscription}"


async def listen(ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
                 ) -> SubscriptionsListenResult:
    subscription = ctx.request_id
    meta = {SUB: subscription}
    honoured = SubscriptionFilter(tools_list_changed=True if params.notifications.tools_list_changed else None)
    send, receive = anyio.create_memory_object_stream[dict](16)
    entry = (ctx.session, subscription, send)
    listeners.append(entry)
    try:
        await ctx.session.send_notification(SubscriptionsAcknowledgedNotification(
            params=SubscriptionsAcknowledgedNotificationParams(notifications=honoured, _meta=meta)),
            related_request_id=subscription)
        async for reminder in receive:
            await ctx.session.send_notification(harn(reminder, meta), related_request_id=subscription)
    finally:
        listeners.remove(entry)
    return SubscriptionsListenResult(_meta=meta)


# MCPServer's own listen handler carries only the SDK's typed change events; a Harn server's
# reminders need a handler of their own, registered on the low-level server it wraps
mcp._lowlevel_server.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)


def declaring(app: Any) -> Any:
    """The SDK's app, its `server/discover` answer carrying Harn's reminder declaration
    (`capabilities._meta.harn.reminders`, which the SDK's capability type cannot hold)."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] != "http" or headers.get(b"mcp-method") != b"server/discover":
            return await app(scope, receive, send)
        start: dict = {}
        body = bytearray()

        async def keep(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    data = _declared(bytes(body))
                    start["headers"] = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"] + [
                        (b"content-length", str(len(data)).encode())]
                    await send(start)
                    await send({"type": "http.response.body", "body": data})

        await app(scope, receive, keep)

    return wrapped


def _declared(body: bytes) -> bytes:
    """A discover answer (JSON, or SSE `data:` lines) with the declaration added."""
    def patch(text: bytes) -> bytes:
        msg = json.loads(text)
        if isinstance(msg.get("result"), dict):
            msg["result"].setdefault("capabilities", {})["_meta"] = {"harn": {"reminders": REMINDERS}}
        return json.dumps(msg).encode()

    if body.lstrip().startswith(b"{"):
        return patch(body)
    return b"\n".join(b"data: " + patch(line[5:]) if line.startswith(b"data:") else line for line in body.split(b"\n"))


def main() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(f"PORT {port}: modern harn server at http://127.0.0.1:{port}/mcp", flush=True)
    config = uvicorn.Config(declaring(mcp.streamable_http_app()), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
