"""URLs shown to people: never with their secrets.

Credentials ride in URLs (`http://user:pw@host/mcp?api_key=K`, `redis://:pw@redis:6379/0`); every
log line, error message and page that quotes one shows it through `redact`.
"""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

SECRET = "***"


def redact(url: str) -> str:
    """``url`` with its userinfo and every query value replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return SECRET
    netloc = parts.netloc
    if "@" in netloc:
        netloc = SECRET + "@" + netloc.rpartition("@")[2]
    query = "&".join(f"{name}={SECRET}" if value or "=" in raw else name
                     for raw in parts.query.split("&") if raw
                     for name, _, value in [raw.partition("=")])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
