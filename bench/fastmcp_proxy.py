"""FastMCP's proxy (`fastmcp.server.create_proxy`) as `python -m bench --peers` runs it, with its
defaults, in front of the same servers reminder-bridge faces.

  python -m bench.fastmcp_proxy http UPSTREAM_URL    Streamable HTTP in and out; prints `PORT <n>`
  python -m bench.fastmcp_proxy stdio -- CMD ARGS    stdio in and out, around a child server
"""
from __future__ import annotations

import socket
import sys


def main() -> None:
    from fastmcp.server import create_proxy

    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "http":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        print(f"PORT {port}", flush=True)
        create_proxy(rest[0]).run(transport="http", host="127.0.0.1", port=port, show_banner=False,
                                  log_level="warning")
        return
    command = rest[1:] if rest[:1] == ["--"] else rest
    config = {"mcpServers": {"server": {"command": command[0], "args": command[1:]}}}
    create_proxy(config).run(transport="stdio", show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
