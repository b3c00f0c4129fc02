"""A standard MCP reminder server on stdio: the bundled example's tools and handshake, but it
declares `capabilities.reminders` and pushes `notifications/reminder` (the proposed standard
form, written out here by hand, not by the proxy's codecs).

    python -m tests.peers.standard_mcp_server

`touch_file {path}` sends one reminder (tags, dedupeKey, ttlTurns, roleHint developer) before its
result. `announce {text}` sends a `notifications/claude/channel` event of the server's own (a server
that is itself a Claude Code channel), which is no reminder.
"""
from __future__ import annotations

import sys

from bridge.examples._stdio import serve
from bridge.examples.mcp_legacy_server import LegacyMcpServer

REMINDERS = {"emit": True, "propagate": ["session"], "roleHints": ["system", "developer"]}


def standard(reply: dict) -> dict:
    """One of the example's replies as a standard server writes it."""
    caps = reply.get("result", {}).get("capabilities") if isinstance(reply.get("result"), dict) else None
    if isinstance(caps, dict):
        caps.pop("_meta", None)
        caps["reminders"] = dict(REMINDERS)
    params = reply.get("params") or {}
    if reply.get("method") == "notifications/message" and params.get("logger") == "harn.reminder":
        legacy = params["_meta"]["harn"]["reminder"]
        return {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": {
            "id": legacy["id"], "body": legacy["body"], "tags": legacy["tags"], "dedupeKey": legacy["dedupeKey"],
            "ttlTurns": legacy["ttlTurns"], "roleHint": "developer"}}}
    return reply


def handle(msg: dict) -> list[dict]:
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    if msg.get("method") == "tools/call" and params.get("name") == "announce":
        text = str((params.get("arguments") or {}).get("text", ""))
        own = {"jsonrpc": "2.0", "method": "notifications/claude/channel",
               "params": {"content": text, "meta": {"kind": "announcement"}}}
        done = {"content": [{"type": "text", "text": "announced"}]}
        return [own, {"jsonrpc": "2.0", "id": msg["id"], "result": done}]
    return [standard(reply) for reply in LegacyMcpServer().handle(msg)]


def main() -> int:
    return serve("standard_mcp_server", handle)


if __name__ == "__main__":
    sys.exit(main())
