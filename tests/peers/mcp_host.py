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

    def notifications(self):
        async def on_reminder(params: ReminderParams) -> None:
            self.received.append(params.reminder)

        return [NotificationBinding(method="notifications/reminder", params_type=ReminderParams, handler=on_reminder)]
