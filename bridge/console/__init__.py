"""The operator console on the admin port (spec §13, docs/console.md): a live reminders page, a
status API with a migration-readiness verdict per route, a Server-Sent Events feed of decisions,
and the `reminder-bridge status` command.

It is an add-on: `feed.Feed` listens to `bridge.telemetry.Recorder` (decisions and handshakes)
and `status.build_status` reads the Recorders, their `status_source` and the budgets; no
translation code knows it exists.
"""
from pathlib import Path

STATIC = Path(__file__).with_name("static")
