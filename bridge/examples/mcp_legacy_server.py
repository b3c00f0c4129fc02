"""A legacy (Harn-style) MCP server that reports file changes as reminders.

Harn never shipped a legacy MCP reminder channel (research/harn.md §2.2); this peer sends
the shape the RFC describes, `notifications/message` with `_meta.harn.reminder`, so the
proxy has a concrete legacy server to translate. It speaks both MCP eras on stdio:
2025-11-25 (`initialize`) and 2026-07-28 (`server/discover`, per-request `_meta`).

Run: python -m bridge.examples.mcp_legacy_server
"""

import sys
import uuid

from bridge.examples._stdio import serve
from bridge.examples.rpc import error_reply

SERVER_INFO = {"name": "legacy-mcp-example", "version": "1.0.0"}
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


def capabilities() -> dict:
    """Server capabilities, with the legacy reminder declaration under `_meta.harn` (spec §3).

    A function, not a constant, so a caller that edits a result in-process cannot change
    what the next one receives.
    """
    return {
        "tools": {},
        "logging": {},
        "_meta": {
            "harn": {
                "reminders": {
                    "emit": True,
                    "propagate": ["all", "session", "none"],
                    "roleHints": ["system", "developer"],
                }
            }
        },
    }


def _string_tool(name: str, description: str, arg: str) -> dict:
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {arg: {"type": "string"}},
            "required": [arg],
        },
    }


def tools() -> list[dict]:
    return [
        _string_tool("touch_file", "Mark a file as changed; the server then reminds the host to re-read it.", "path"),
        _string_tool("echo", "Return the text unchanged.", "text"),
    ]


def _notification(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def reminder_notification(path: str) -> dict:
    """The legacy reminder: a log line whose `_meta.harn.reminder` carries the camelCase envelope."""
    body = f"{path} changed externally; re-read it before editing."
    return _notification(
        "notifications/message",
        {
            "level": "info",
            "logger": "harn.reminder",
            "data": body,
            "_meta": {
                "harn": {
                    "reminder": {
                        "id": str(uuid.uuid4()),
                        "body": body,
                        "tags": ["workspace", "file_changed"],
                        "dedupeKey": "file_changed:" + path,
                        "ttlTurns": 2,
                        "preserveOnCompact": False,
                        "propagate": "session",
                        "roleHint": "system",
                        "source": "stdlib_provider",
                    }
                }
            },
        },
    )


class LegacyMcpServer:
    """Stateless request handler; `main()` wires it to stdio."""

    def handle(self, msg: dict) -> list[dict]:
        """Return the messages to send back for one incoming message, in wire order."""
        method = msg.get("method")
        if "id" not in msg or not isinstance(method, str):
            return []  # notifications and stray responses get no answer
        msg_id = msg["id"]
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        modern = PROTOCOL_VERSION_KEY in meta

        if method == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": capabilities(), "serverInfo": dict(SERVER_INFO)}
            return [self._result(msg_id, result, modern=False)]
        if method == "server/discover":
            result = {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": capabilities(),
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": dict(SERVER_INFO)},
            }
            return [{"jsonrpc": "2.0", "id": msg_id, "result": result}]
        if method == "ping":
            return [self._result(msg_id, {}, modern)]
        if method == "tools/list":
            result = {"tools": tools()}
            if modern:
                result.update(ttlMs=0, cacheScope="private")
            return [self._result(msg_id, result, modern)]
        if method == "tools/call":
            return self._call_tool(msg_id, params, modern)
        return [error_reply(msg_id, -32601, "Method not found", method)]

    def _call_tool(self, msg_id, params: dict, modern: bool) -> list[dict]:
        name = params.get("name")
        args = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        if name == "touch_file":
            path = args.get("path")
            if not isinstance(path, str) or not path:
                return [error_reply(msg_id, -32602, "touch_file requires a string `path`")]
            result = {
                "content": [{"type": "text", "text": f"touched {path}"}],
                "structuredContent": {"path": path},
                "isError": False,
            }
            log = _notification("notifications/message", {"level": "info", "logger": "fs", "data": f"touched {path}"})
            # The reminder and the log go out before the response, as a real server streams them.
            return [reminder_notification(path), log, self._result(msg_id, result, modern)]
        if name == "echo":
            text = args.get("text")
            if not isinstance(text, str):
                return [error_reply(msg_id, -32602, "echo requires a string `text`")]
            result = {"content": [{"type": "text", "text": text}], "isError": False}
            return [self._result(msg_id, result, modern)]
        return [error_reply(msg_id, -32602, f"Unknown tool: {name}")]

    @staticmethod
    def _result(msg_id, result: dict, modern: bool) -> dict:
        """Wrap a result; 2026-07-28 requires `resultType` on every result."""
        if modern:
            result = {**result, "resultType": "complete"}
        return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def main() -> int:
    return serve("mcp_legacy_server", LegacyMcpServer().handle)


if __name__ == "__main__":
    sys.exit(main())
