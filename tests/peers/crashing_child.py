"""A stdio JSON-RPC child that fails on command, for the fault suite.

  ping            answered at once with `{}`
  hang            never answered (stays in flight)
  die {code}      exits with that code at once, without answering
  kill {signal}   kills itself with that signal (e.g. 9), without answering
  flood {count}   answers with `count` notifications then the result, then exits 0 on SIGTERM

Every other line is ignored. On SIGTERM it writes a last notification and exits 143.
"""
import json
import os
import signal
import sys



def send(msg: dict) -> None:
    """One unbuffered write per message (all are below PIPE_BUF, so each is whole even when
    SIGTERM's handler writes in between)."""
    os.write(1, json.dumps(msg).encode() + b"\n")


def on_term(*_):
    send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "bye"}})
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
for line in sys.stdin.buffer:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "ping":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    elif method == "die":
        os._exit(params.get("code", 3))
    elif method == "kill":
        os.kill(os.getpid(), params.get("signal", 9))
    elif method == "flood":
        for i in range(params.get("count", 100)):
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}})
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sent": params.get("count", 100)}})
