"""A child that answers each request line at once (unbuffered), for round-trip latency: the peer side.

It answers like a fast MCP server: the request's id (a number, or a string such as the era
bridge's own `initialize` has) is read with a regex (the same cost for the direct baseline and
through the proxy) and a fixed `tools/call` result goes back.
"""
import os
import re
import sys

ID = re.compile(rb'"id":(\d+|"[^"]*")')
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    match = ID.search(line)
    if match is None:
        continue
    out.write(b'{"jsonrpc":"2.0","id":' + match.group(1) + b',"result":{"content":[{"type":"text","text":"hello"}]}}\n')
    out.flush()
os._exit(0)
