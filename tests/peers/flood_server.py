"""A legacy MCP server that floods: `tools/call flood {count, start}` sends `count` legacy
reminders, each followed by an ordinary log line numbered `seq`, then the tool result.
Frames are written compactly and deterministically so a test can compare bytes."""
from __future__ import annotations

import json
import sys

CAPS = {"tools": {}, "logging": {}, "_meta": {"harn": {"reminders": {"emit": True, "propagate": ["session"],
                                                                    "roleHints": ["system"]}}}}


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def log_line(seq: int) -> str:
    return dumps({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "logger": "flood", "data": {"seq": seq}}})


def reminder(seq: int) -> str:
    body = f"build {seq} finished"
    return dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body,
        "_meta": {"harn": {"reminder": {"id": f"r{seq}", "body": body, "tags": ["ci"], "dedupeKey": f"build:{seq % 7}"}}}}})


def main() -> int:
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue
        method, msg_id = msg["method"], msg["id"]
        if method == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": CAPS, "serverInfo": {"name": "flood", "version": "1"}}
        elif method == "tools/call":
            args = msg["params"].get("arguments", {})
            start, count = int(args.get("start", 0)), int(args.get("count", 1))
            for seq in range(start, start + count):
                out.write(reminder(seq) + "\n")
                out.write(log_line(seq) + "\n")
            result = {"content": [{"type": "text", "text": f"flooded {start}..{start + count - 1}"}], "isError": False}
        else:
            result = {}
        out.write(dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
