"""A stdio MCP server that says where it runs: `tools/call environment {names: [...]}` answers with
its working directory and the values of the variables named (null for one not set). For tests
of `reminder-bridge stdio --env/--cwd` and of a route's `command`, `env` and `cwd`.

Usage: python -m tests.peers.environment_server
"""
import os
import sys

from bridge.examples._stdio import serve


def handle(msg: dict) -> list[dict]:
    if "id" not in msg:
        return []
    if msg.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "environment", "version": "1"}}
    else:
        names = ((msg.get("params") or {}).get("arguments") or {}).get("names") or []
        result = {"structuredContent": {"cwd": os.getcwd(), "env": {name: os.environ.get(name) for name in names}},
                  "content": []}
    return [{"jsonrpc": "2.0", "id": msg["id"], "result": result}]


if __name__ == "__main__":
    sys.exit(serve("environment_server", handle))
