"""URLs shown to people: never with their secrets; and which hosts are this machine's own.

Credentials ride in URLs (`http://user:pw@host/mcp?api_key=K`, `redis://:pw@redis:6379/0`); every
log line, error message and page that quotes one shows it through `redact`.  Whether a host is
loopback (an admin port's listen address, a browser's `Origin`, a console's `Host`) is decided
once, by `is_loopback`, so the admin port and the HTTP routes never disagree about a name.
"""
from __future__ import annotations

import ipaddress
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


#: `allowed_origins` keyword for every loopback origin (`http://localhost:*`, `http://127.0.0.1:*`, `[::1]`).
LOOPBACK_ORIGINS = "loopback"


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` can only mean this machine: `localhost` or a name below it (RFC 6761 §6.3:
    `*.localhost` resolves to loopback and never reaches DNS), or a loopback address (`127.0.0.0/8`,
    `::1`), bracketed or not, in any case."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
