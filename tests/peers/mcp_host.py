"""How a standard MCP host listens for `notifications/reminder` with the official `mcp` SDK:
a `ClientExtension` with a `NotificationBinding` (research/protocols.md §4.2), and how a 2025-11-25
host hears of list changes and resource updates (its message handler). Shared by tests."""
import anyio
from mcp.client.extension import ClientExtension, NotificationBinding
from pydantic import BaseModel, ConfigDict


class ReminderParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    reminder: dict


class Reminders(ClientExtension):
    """How a standard host listens for `notifications/reminder` with the official SDK."""

    identifier = "com.example/reminders"

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.metas: list[dict] = []  # each notification's `_meta` (trace context), in the same order

    def notifications(self):
        async def on_reminder(params: ReminderParams) -> None:
            self.received.append(params.reminder)
            self.metas.append((params.model_extra or {}).get("_meta") or {})

        return [NotificationBinding(method="notifications/reminder", params_type=ReminderParams, handler=on_reminder)]


class Changes:
    """A `message_handler` for the SDK's `Client`: `tools/list_changed` sets ``changed``, each
    `resources/updated` adds its URI to ``updates`` and sets ``updated``. `touched` drives
    tests.peers.legacy_only_server's `touch` tool from a 2025-11-25 host."""

    def __init__(self) -> None:
        self.changed, self.updated = anyio.Event(), anyio.Event()
        self.updates: list[str] = []

    async def __call__(self, message) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/resources/updated":
            self.updates.append(str(root.params.uri))
            self.updated.set()
        if method == "notifications/tools/list_changed":
            self.changed.set()

    async def touched(self, client, uri: str = "file:///notes.txt") -> None:
        """Subscribe to ``uri``, `touch`, and wait for the list change and the update it sends."""
        await client.subscribe_resource(uri)
        await client.call_tool("touch", {"path": "c.py"})
        with anyio.fail_after(20):
            await self.changed.wait()
            await self.updated.wait()
