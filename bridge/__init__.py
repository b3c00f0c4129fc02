"""reminder-bridge: a transparent sidecar that rewrites ambient reminders between MCP, ACP and A2A dialects."""
