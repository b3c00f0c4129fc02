"""A Claude Code channel that relays permission prompts (Claude Code >= 2.1.81), on stdio, written
byte by byte so a test can tell whether a proxy touched the relay:

    python -m tests.peers.permission_channel_server RECORD_FILE

Its `initialize` result declares `experimental["claude/channel"]` and
`experimental["claude/channel/permission"]`. Each `notifications/claude/channel/permission_request`
it gets (Claude Code asks for a verdict) is answered with VERDICT, a
`notifications/claude/channel/permission` for that `request_id`, in spacing and key order no
encoder would choose. `tools/call relay_back` writes PROMPT, a permission_request of its own,
toward the host before its result (the same notification the other way). Every line it reads is
appended to RECORD_FILE, exactly as read.
"""
from __future__ import annotations

import json
import sys

CAPABILITIES = {"tools": {}, "experimental": {"claude/channel": {}, "claude/channel/permission": {}}}
VERDICT = ('{ "params" : {"behavior":"allow",  "request_id":"%s", "_meta":{"x-relay":[1, 2.50]}},'
           '"method":"notifications/claude/channel/permission","jsonrpc":"2.0"}')
PROMPT = ('{"jsonrpc":"2.0","method":"notifications/claude/channel/permission_request","params":'
          '{"request_id":"qwxyz","tool_name":"Bash","description":"rm -rf build/",'
          '"input_preview":"{\\"command\\": \\"rm -rf build/\\"}","extra":null}}')


def write(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(record: str) -> int:
    with open(record, "ab") as seen:
        for raw in sys.stdin.buffer:
            seen.write(raw)
            seen.flush()
            msg = json.loads(raw)
            method, msg_id = msg.get("method"), msg.get("id")
            if method == "notifications/claude/channel/permission_request":
                write(VERDICT % msg["params"]["request_id"])
            elif method == "initialize":
                write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {
                    "protocolVersion": "2025-11-25", "capabilities": CAPABILITIES,
                    "serverInfo": {"name": "permission-relay", "version": "1"}}}))
            elif method == "tools/call":
                write(PROMPT)
                write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {"content": []}}))
            elif msg_id is not None and method is not None:
                write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
