"""What `serve` says once it listens (one process, or the supervisor of `--workers N` once every
worker does): the `listening` log line on stderr, for log readers and supervisors, and one line
per route on stdout, for a person."""
from __future__ import annotations

import logging
import sys
from typing import Any

from bridge.display import safe_text
from bridge.logs import SERVE, log_event


def route_line(route: dict[str, Any]) -> str:
    """`MCP route github at http://127.0.0.1:8080/mcp → http://host:3000/mcp` for one route of the
    `listening` line (its upstream already shown with its secrets as `***`)."""
    return (f"{route['protocol'].upper()} route {safe_text(route['name'])} at {safe_text(route['url'])} "
            f"→ {safe_text(route['upstream'])}")


def announce(listening: dict[str, Any]) -> None:
    log_event(SERVE, listening, stamped=False, level=logging.INFO)
    sys.stdout.write("".join(route_line(route) + "\n" for route in listening["routes"]))
    sys.stdout.flush()
