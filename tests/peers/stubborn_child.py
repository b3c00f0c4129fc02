"""A stdio child that does not go quietly, for the fault suite.

It never reads its stdin, so the host's EOF does not end it.  It first writes one `ready`
notification, then:

  --flood        writes legacy MCP reminders, each followed by a 64 KiB log line, forever
                 (blocking writes: with nobody reading, it sits in the kernel on a full pipe)
  (default)      stays silent until a signal ends it
  --ignore-term  ignores SIGTERM (and SIGINT): only SIGKILL ends it
"""
from __future__ import annotations

import json
import signal
import sys


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def reminder(seq: int) -> bytes:
    body = f"build {seq} finished"
    return dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body,
        "_meta": {"harn": {"reminder": {"id": f"r{seq}", "body": body, "dedupeKey": f"build:{seq % 7}"}}}}})


def main(args: list[str]) -> None:
    if "--ignore-term" in args:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout.buffer
    out.write(dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "ready"}}))
    out.flush()
    if "--flood" not in args:
        while True:
            signal.pause()
    big = dumps({"jsonrpc": "2.0", "method": "notifications/message",
                 "params": {"level": "info", "logger": "flood", "data": "x" * 65536}})
    seq = 0
    while True:
        out.write(reminder(seq))
        out.write(big)
        seq += 1


if __name__ == "__main__":
    main(sys.argv[1:])
