"""FastMCP's proxy (`fastmcp.server.create_proxy`) as `python -m bench --peers` runs it, with its
defaults, in front of the same servers reminder-bridge faces. It runs on the interpreter of the
virtualenv the bench installed FastMCP into (bench/peer_install.py), as a script: it needs
nothing from this project.

  python bench/fastmcp_proxy.py http UPSTREAM_URL      Streamable HTTP in and out; prints `PORT <n>`
  python bench/fastmcp_proxy.py http -- CMD ARGS       Streamable HTTP in, a stdio server out
  python bench/fastmcp_proxy.py stdio UPSTREAM_URL     stdio in, Streamable HTTP out
  python bench/fastmcp_proxy.py stdio -- CMD ARGS      stdio in and out, around a child server
"""
from __future__ import annotations

import socket
import sys


def main() -> None:
    from fastmcp.server import create_proxy

    mode, rest = sys.argv[1], sys.argv[2:]
    if rest[:1] == ["--"]:
        command = rest[1:]
        upstream: object = {"mcpServers": {"server": {"command": command[0], "args": command[1:]}}}
    else:
        upstream = rest[0]
    proxy = create_proxy(upstream)
    if mode == "stdio":
        proxy.run(transport="stdio", show_banner=False, log_level="warning")
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    print(f"PORT {port}", flush=True)
    proxy.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
