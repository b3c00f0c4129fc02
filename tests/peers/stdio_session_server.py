"""A legacy (Harn) MCP server on stdio with state of its own, for `serve --upstream-command`: the
bundled example's tools and reminders (`touch_file`, `echo`), plus

  remember {text}  keep ``text`` in this process; `recall` gives it back (a session's own data)
  recall {text}    what `remember` kept, and this process's pid, as "<pid> <text>"
  crash {text}     exit with code 3 before answering (a server that dies mid-call)
  hang {text}      never answered
  getenv {text}    the value of environment variable ``text`` in this process ("" when unset)
  touch_after {text}  answer, then send the legacy reminder for file ``text`` (outside any call)
  ping_listeners {text}  a legacy reminder ``text`` on the newest open 2026-07-28 listen stream,
                   stamped with its subscription id (`subscriptions/listen` is acknowledged, held open)

    python -m tests.peers.stdio_session_server [--greet]

``--greet``: a log line (`notifications/message`, logger "greeter") before anything is asked.
"""
from __future__ import annotations

import os
import sys

from bridge.examples._stdio import serve, write_message
from bridge.examples.mcp_legacy_server import (PROTOCOL_VERSION_KEY, LegacyMcpServer, _string_tool,
                                              reminder_notification)

EXTRA = [_string_tool("remember", "Keep the text in this process.", "text"),
         _string_tool("recall", "The text kept, and this process's pid.", "text"),
         _string_tool("crash", "Exit before answering.", "text"),
         _string_tool("hang", "Never answered.", "text"),
         _string_tool("getenv", "An environment variable of this process.", "text"),
         _string_tool("ping_listeners", "An ambient reminder on the newest listen stream.", "text"),
         _string_tool("touch_after", "Answer, then remind the host that the file changed.", "text")]
kept = {"text": ""}
SUB = "io.modelcontextprotocol/subscriptionId"
listeners: list = []  # the ids of open listen requests, oldest first


def text_result(msg: dict, text: str) -> dict:
    modern = PROTOCOL_VERSION_KEY in ((msg.get("params") or {}).get("_meta") or {})  # 2026-07-28
    return LegacyMcpServer._result(msg["id"], {"content": [{"type": "text", "text": text}]}, modern)


def handle(msg: dict) -> list[dict]:
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    name = params.get("name")
    text = str((params.get("arguments") or {}).get("text", ""))
    if msg.get("method") == "tools/call" and name == "remember":
        kept["text"] = text
        return [text_result(msg, "kept")]
    if msg.get("method") == "tools/call" and name == "recall":
        return [text_result(msg, f"{os.getpid()} {kept['text']}")]
    if msg.get("method") == "tools/call" and name == "touch_after":
        return [text_result(msg, "later"), reminder_notification(text)]
    if msg.get("method") == "subscriptions/listen":
        listeners.append(msg["id"])
        asked = params.get("notifications") or {}
        honoured = {"toolsListChanged": True} if asked.get("toolsListChanged") else {}
        return [{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                 "params": {"notifications": honoured, "_meta": {SUB: msg["id"]}}}]
    if msg.get("method") == "tools/call" and name == "ping_listeners":
        if not listeners:
            return [text_result(msg, "nobody listens")]
        reminder = reminder_notification(text)
        reminder["params"]["_meta"][SUB] = listeners[-1]
        return [reminder, text_result(msg, f"sent to {listeners[-1]}")]
    if msg.get("method") == "tools/call" and name == "getenv":
        return [text_result(msg, os.environ.get(text, ""))]
    if msg.get("method") == "tools/call" and name == "hang":
        return []
    if msg.get("method") == "tools/call" and name == "crash":
        os._exit(3)
    replies = LegacyMcpServer().handle(msg)
    for reply in replies:
        result = reply.get("result")
        if msg.get("method") == "tools/list" and isinstance(result, dict):
            result["tools"] = [*result["tools"], *EXTRA]
    return replies


def main() -> int:
    if "--greet" in sys.argv[1:]:
        write_message({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "logger": "greeter", "data": "hello"}})
    return serve("stdio_session_server", handle)


if __name__ == "__main__":
    sys.exit(main())
