"""Which outbox resources the proxy will poll or serve, and where their URIs come from.

An outbox is declared as a bare resource URI and read as the RFC 6570 template
`<resource>{?cursor,maxEvents,maxAgeMs}` (landscape.md §3.2-§3.3).  So a declaration must carry
a scheme, must carry no query and no fragment (the proxy appends its own), and must not use a
scheme a host resolves itself: one resource cannot mean two things to the same reader.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

#: Schemes a NimbleBrain host interprets itself; an outbox there would be two things at once.
RESERVED_SCHEMES = ("skill", "ui", "instructions", "artifact", "files", "app")
MAX_URI = 512
MANIFEST_KEY = "ai.nimblebrain/host"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def check_resource(uri: Any) -> str:
    """The URI unchanged, or ValueError saying which rule it breaks and why the rule exists."""
    if not isinstance(uri, str) or not uri:
        raise ValueError("must be a non-empty resource URI such as \"acme://notifications\"")
    shown = json.dumps(uri, ensure_ascii=False)
    if len(uri) > MAX_URI:
        raise ValueError(f"is {len(uri)} characters long; an outbox URI may have at most {MAX_URI}")
    match = _SCHEME.match(uri)
    if match is None:
        raise ValueError(f"has no scheme (got {shown}); an outbox is an MCP resource URI such as "
                         "\"acme://notifications\"")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        raise ValueError(f"contains whitespace or control characters (got {shown})")
    if "?" in uri:
        raise ValueError(f"carries a query string (got {shown}); the proxy appends "
                         "?cursor=…&maxEvents=…&maxAgeMs=… itself, so a query of yours would collide with it")
    if "#" in uri:
        raise ValueError(f"carries a fragment (got {shown}); the proxy appends its own query, which a "
                         "fragment would swallow")
    scheme = match.group(1).lower()
    if scheme in RESERVED_SCHEMES:
        raise ValueError(f"uses the {scheme}:// scheme, which hosts resolve themselves "
                         f"({', '.join(s + '://' for s in RESERVED_SCHEMES)}); one resource cannot be an "
                         "outbox and something else to the same reader, so declare it in your server's own "
                         "namespace")
    return uri


def read_manifest(path: str | Path) -> str:
    """The outbox URI a NimbleBrain (MCPB) `manifest.json` declares, checked like any other."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read manifest {str(path)!r}: {exc.strerror or exc}") from None
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"manifest {str(path)!r} is not JSON: {exc}") from None
    where = f'_meta["{MANIFEST_KEY}"].notifications.resource'
    node: Any = manifest
    for key in ("_meta", MANIFEST_KEY, "notifications"):
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or "resource" not in node:
        raise ValueError(f"manifest {str(path)!r} declares no outbox (no {where})")
    try:
        return check_resource(node["resource"])
    except ValueError as exc:
        raise ValueError(f"manifest {str(path)!r}: {where} {exc}") from None


def read_uri(resource: str, cursor: str | None, max_events: int, max_age_ms: int) -> str:
    """`<resource>{?cursor,maxEvents,maxAgeMs}` expanded; the bootstrap read has no cursor."""
    query: dict[str, str] = {}
    if cursor is not None:
        query["cursor"] = cursor
    query["maxEvents"] = str(max_events)
    query["maxAgeMs"] = str(max_age_ms)
    return f"{resource}?{urlencode(query, quote_via=quote, safe='')}"  # RFC 6570: %20, never +
