"""How a standard MCP host listens for `notifications/reminder` with the official `mcp` SDK:
a `ClientExtension` with a `NotificationBinding` (research/protocols.md §4.2). Shared by tests."""
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
