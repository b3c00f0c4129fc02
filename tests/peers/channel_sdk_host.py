"""A host built on the official `mcp` SDK (2.3) that receives `notifications/claude/channel`.

    python -m tests.peers.channel_sdk_host [--via client|session] [--calls JSON|@FILE] [--wait SECONDS]
                                           [--server-name NAME] -- CMD ARGS

How the SDK delivers a custom server notification: a method the negotiated version's core
tables do not define is dropped (logged at DEBUG) unless a `NotificationBinding` names it;
then its params are validated against the binding's `params_type` and handed to its
`handler` through a bounded per-method FIFO (`ClientSession._on_notify`,
mcp/client/session.py). `message_handler` never sees such a notification: it only gets the
core `ServerNotification` types (and transport exceptions). Two ways to install a binding:

- ``--via client`` (default): `mcp.Client(..., extensions=[ClaudeChannelEvents()])`, the
  public API (SEP-2133 `ClientExtension.notifications()`). The extension's identifier is then
  advertised in the host's `capabilities.extensions`; it is not a reminder capability (its
  name does not end in ``/reminders``), so the proxy still sees a host with no reminder support.
- ``--via session``: `ClientSession(read, write, notification_bindings=[...])` over
  `stdio_client`, with no extension advertised: the host sends `capabilities: {}`, exactly as
  Claude Code does.

The report has the same format as `tests/peers/claude_code_host.py` (JSON on stdout).
"""
from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp_types import Implementation
from pydantic import BaseModel, ConfigDict

from tests.peers.claude_code_host import (
    CHANNEL_METHOD, CLIENT_INFO, DEFAULT_CALLS, _parse, declares_channel, render_channel,
)


class ChannelParams(BaseModel):
    """`params` of a channel event. Lenient on purpose (every key kept, `content` of any type),
    so a malformed event is recorded rather than dropped by the SDK's validation."""

    model_config = ConfigDict(extra="allow")
    content: Any = None
    meta: Any = None


class ClaudeChannelEvents(ClientExtension):
    """Observes `notifications/claude/channel`: the SDK's notification-binding mechanism."""

    identifier = "dev.reminder-bridge.tests/claude-channel"

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def notifications(self):
        async def on_channel(params: ChannelParams) -> None:
            self.received.append(params.model_dump(exclude_unset=True))

        return [NotificationBinding(method=CHANNEL_METHOD, params_type=ChannelParams, handler=on_channel)]


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json") if isinstance(model, BaseModel) else model


async def run_sdk_host(argv: list[str], calls: list[dict[str, Any]] | None = None, *, via: str = "client",
                       wait: float = 0.3, timeout: float = 10.0, server_name: str = "workspace",
                       dev_channels: bool = True, cwd: str | None = None,
                       env: dict[str, str] | None = None) -> dict[str, Any]:
    """One session against ``argv``; returns the report."""
    calls = DEFAULT_CALLS if calls is None else calls
    events = ClaudeChannelEvents()
    report: dict[str, Any] = {
        "client_info": CLIENT_INFO, "server_name": server_name, "dev_channels": dev_channels, "via": via,
        "initialize": None, "channel_listener": False, "channel": events.received, "rendered": [],
        "notifications": [], "results": [], "requests": [], "unparsed": [], "stray_responses": [],
        "timeline": [], "exit_code": None,
    }

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            report["unparsed"].append({"error": repr(message)})
            report["timeline"].append({"kind": "unparsed"})
            return
        report["notifications"].append(_dump(message))
        report["timeline"].append({"kind": "notification", "method": getattr(message, "method", None)})

    server = StdioServerParameters(command=argv[0], args=argv[1:], cwd=cwd, env=env)
    info = Implementation(**CLIENT_INFO)
    async with AsyncExitStack() as stack:
        # (no cancel scope around these: each enters a task group that must outlive it; the
        # SDK's read timeout bounds the handshake)
        if via == "client":
            client = await stack.enter_async_context(Client(
                server, mode="legacy", extensions=[events], message_handler=on_message, client_info=info,
                read_timeout_seconds=timeout, cache=None))
            session = client.session
            list_tools, call_tool = client.list_tools, client.call_tool
        elif via == "session":
            read, write = await stack.enter_async_context(stdio_client(server))
            session = await stack.enter_async_context(ClientSession(
                read, write, read_timeout_seconds=timeout, message_handler=on_message, client_info=info,
                notification_bindings=events.notifications()))
            await session.initialize()
            list_tools, call_tool = session.list_tools, session.call_tool
        else:
            raise ValueError(f"via must be 'client' or 'session', not {via!r}")
        init = _dump(session.initialize_result)
        report["initialize"] = {"result": init}
        report["channel_listener"] = dev_channels and declares_channel(init)
        for call in calls:
            method, params = call.get("method"), call.get("params") or {}
            entry: dict[str, Any] = {"method": method, "params": call.get("params")}
            try:
                with anyio.fail_after(timeout):
                    if method == "tools/list":
                        entry["result"] = _dump(await list_tools())
                    elif method == "tools/call":
                        entry["result"] = _dump(await call_tool(params.get("name"), params.get("arguments")))
                    else:
                        entry["error"] = {"code": -32601, "message": f"{method} is not driven by the SDK host"}
            except TimeoutError:
                entry["timeout"] = True
            except Exception as exc:  # an MCPError, a validation error: recorded, never fatal
                entry["error"] = {"message": repr(exc)}
            report["results"].append(entry)
            report["timeline"].append({"kind": "response", "method": method})
        await anyio.sleep(wait)  # a window for trailing notifications, as a host that stays a moment has
    # binding handlers run in their own task: order among channel events is kept, not their
    # position relative to responses, so the timeline lists channel events once, at the end
    report["timeline"] += [{"kind": "channel", "method": CHANNEL_METHOD} for _ in events.received]
    if report["channel_listener"]:
        report["rendered"] = [render_channel(server_name, p) for p in events.received]
    return report


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    via = "client"
    if "--via" in args and args.index("--via") < (args.index("--") if "--" in args else len(args)):
        i = args.index("--via")
        via = args[i + 1]
        del args[i:i + 2]
    opts, command = _parse(args)
    report = anyio.run(lambda: run_sdk_host(command, via=via, **opts))
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
