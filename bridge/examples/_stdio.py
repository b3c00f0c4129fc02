"""Newline-delimited JSON-RPC over stdin/stdout, shared by the stdio example peers.

Both MCP and ACP frame stdio as one JSON object per line; keeping the loop in one place
keeps the peers' files about protocol behaviour only.
"""

import json
import sys
from typing import Callable


def write_message(msg: dict) -> None:
    """Write one compact frame and flush, so a proxy reading the pipe sees it at once."""
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def serve(name: str, handle: Callable[[dict], list[dict]]) -> int:
    """Answer each line on stdin with `handle`'s messages, in order, until EOF (exit code 0).

    A line that is not a JSON object is skipped with a note on stderr: a malformed frame
    must not take the peer down (spec §8.3 expects the connection to survive it).
    """
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as exc:  # bad JSON or bad UTF-8
            print(f"{name}: ignoring non-JSON line: {exc}", file=sys.stderr, flush=True)
            continue
        if not isinstance(msg, dict):
            print(f"{name}: ignoring non-object JSON line", file=sys.stderr, flush=True)
            continue
        for out in handle(msg):
            write_message(out)
    return 0
