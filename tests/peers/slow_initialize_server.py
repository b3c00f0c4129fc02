"""A 2025-11-25 MCP server on stdio whose `initialize` answer waits until the test lets it: it
opens the FIFO named on its command line for reading (which blocks until the test opens it for
writing), then answers, and answers each `tools/call` with the length of its `text` argument.
Raw JSON-RPC: what it is about is the time before its handshake, not the SDK.

    python -m tests.peers.slow_initialize_server FIFO
"""
from __future__ import annotations

import json
import sys


def main(fifo: str) -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("method") == "initialize":
            with open(fifo) as released:  # blocks until the test opens the FIFO to write
                released.read()
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "slow-initialize", "version": "1"}}
        elif msg.get("method") == "tools/call":
            text = msg["params"].get("arguments", {}).get("text", "")
            result = {"content": [{"type": "text", "text": str(len(text))}]}
        else:
            continue
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
