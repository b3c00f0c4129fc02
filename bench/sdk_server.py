"""An MCP server written with the official Python SDK (`mcp.server.MCPServer`), over stdio: one
`echo` tool. The cold-start scenario measures a typical SDK server's start beside a small one."""
from mcp.server import MCPServer

server = MCPServer("bench-sdk")


@server.tool()
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    server.run("stdio")
