"""HTTP forwarding rules of `serve`: which headers cross the proxy, which origins may call it, and
how an upstream URL is joined, authenticated and shown without its secrets.

Pure functions over header mappings and URL strings; the `http` package applies them.
"""
from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from bridge.urls import LOOPBACK_ORIGINS, SECRET, is_loopback, redact

#: Hop-by-hop headers (RFC 9110 §7.6.1) and those the proxy recomputes; never forwarded.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade", "content-length"})
#: Request headers the proxy sets itself: the upstream's own Host, and unencoded bodies (the proxy
#: reads what it may rewrite; without an explicit Accept-Encoding aiohttp would ask for gzip).
NOT_UPSTREAM = HOP_BY_HOP | {"host", "accept-encoding"}
#: The WebSocket handshake is the proxy's own on each side.
WEBSOCKET_HANDSHAKE = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                                 "sec-websocket-protocol", "sec-websocket-accept"})


def end_to_end(headers: Mapping[str, str], drop: frozenset[str] = HOP_BY_HOP,
               seen: dict[str, str] | None = None) -> dict[str, str]:
    """The headers that may cross the proxy: neither hop-by-hop nor named in `Connection` (RFC
    9110 §7.6.1). One pass; a second only when `Connection` names a header not dropped anyway.
    ``seen`` gets the first value of each dropped header it names (lower-case), in the same pass."""
    out: dict[str, str] = {}
    named: set[str] = set()
    for key, value in headers.items():
        low = key.lower()
        if low not in drop:
            out[key] = value
        elif low == "connection":
            named.update(t for token in value.split(",") if (t := token.strip().lower()) and t not in drop)
        elif seen is not None and low in seen and not seen[low]:
            seen[low] = value
    if named:
        return {k: v for k, v in out.items() if k.lower() not in named}
    return out


#: the client's own `X-Forwarded-*` never go on as it sent them: the proxy writes its hop's
_FORWARDED = frozenset({"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"})
_NOT_UPSTREAM_HTTP = NOT_UPSTREAM | _FORWARDED
_NOT_UPSTREAM_WEBSOCKET = NOT_UPSTREAM | WEBSOCKET_HANDSHAKE | _FORWARDED


def upstream_headers(headers: Mapping[str, str], *, client: str | None, host: str, scheme: str,
                     own: Mapping[str, str] | None = None, websocket: bool = False) -> dict[str, str]:
    """A client's request headers as the upstream gets them: end-to-end ones, the upstream's own
    Host (set by the HTTP client from the URL), `X-Forwarded-*` naming the client side, and the
    route's own headers (`Upstream.own`) in place of the client's of the same names."""
    seen = {"x-forwarded-for": ""}
    out = end_to_end(headers, _NOT_UPSTREAM_WEBSOCKET if websocket else _NOT_UPSTREAM_HTTP, seen)
    if not websocket:
        out["Accept-Encoding"] = "identity"
    forwarded_for = seen["x-forwarded-for"]
    if client:
        out["X-Forwarded-For"] = f"{forwarded_for}, {client}" if forwarded_for else client
    out["X-Forwarded-Host"] = host
    out["X-Forwarded-Proto"] = scheme
    if own:
        return with_own(out, own)
    return out


def with_own(headers: Mapping[str, str], own: Mapping[str, str], former: Mapping[str, str] | None = None) -> dict[str, str]:
    """``headers`` with ``own`` in place of any header of the same name (names are case-blind), and
    without ``former``'s (a route's own headers before a reload) where they still hold its value."""
    replaced = {name.lower() for name in own}
    stale = {name.lower(): value for name, value in (former or {}).items()}
    out = {k: v for k, v in headers.items() if k.lower() not in replaced and stale.get(k.lower()) != v}
    out.update(own)
    return out


# -- origins -------------------------------------------------------------------------------------
def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """Requests without `Origin` (every non-browser client) always pass; a browser's origin must be
    listed, `*` allowing all and `loopback` every localhost origin (MCP asks local servers to
    refuse other origins: DNS rebinding)."""
    if origin is None:
        return True
    origin = origin.strip().lower()
    for entry in allowed:
        if entry == "*" or entry == origin:
            return True
        if entry == LOOPBACK_ORIGINS:
            try:
                parts = urlsplit(origin)
                if parts.scheme in ("http", "https") and is_loopback(parts.hostname):
                    return True
            except ValueError:
                continue
    return False


# -- upstream URLs -------------------------------------------------------------------------------
#: Joined upstream URLs an `Upstream` keeps (cleared when full: a client varying its paths costs a join each).
URLS_KEPT = 256


class Upstream:
    """An upstream URL: joined with request paths and queries, sent with the route's own headers
    (its userinfo as `Authorization`, and the route's `headers`), and shown everywhere with its
    userinfo, query values and header values redacted.

    How a request's path reaches it (docs/http.md, "Paths"): ``mounted`` (a route with a `path`),
    the route's path stands for the URL: `PATH/REST` goes to `URL/REST`. Not mounted (no `path`,
    and the `--upstream` shortcut), every path goes unchanged to the URL's origin, so the URL's own
    path (`/mcp`) is where the host posts, at the proxy too."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, mounted: bool = True):
        parts = urlsplit(url)
        self.scheme = parts.scheme
        #: the path the URL names (an endpoint such as /mcp, or none)
        self.endpoint = parts.path
        #: the path request paths are joined below
        self.path = parts.path if mounted else ""
        self.query = parts.query
        self.netloc = parts.hostname or ""
        if ":" in self.netloc:
            self.netloc = f"[{self.netloc}]"
        if parts.port is not None:
            self.netloc += f":{parts.port}"
        #: headers every upstream request carries in place of the client's: `Authorization` when the
        #: URL names a user (HTTP basic, as a browser would), then the route's own `headers`
        self.own: dict[str, str] = {}
        secrets: list[str] = []
        if parts.username is not None:
            user, password = unquote(parts.username), unquote(parts.password or "")
            self.own["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            secrets += [parts.username, user, parts.password or "", password]
        self.own = with_own(self.own, headers or {})
        for value in self.own.values():  # `Bearer TOKEN`: the token alone is a secret too
            secrets += [value, value.split()[-1]] if value.strip() else []
        secrets += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
        secrets += [unquote(value) for value in list(secrets)]
        #: longest first, so a secret that contains another is replaced whole
        self.secrets = sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True)
        self.shown = redact(url)
        #: what tells two upstreams apart: a reload that changes any of it takes a new one
        self.key = (url, tuple(sorted(self.own.items())), mounted)
        self._joined: dict[tuple[str, str], str] = {}

    def url(self, rest: str, query: str) -> str:
        """The upstream URL for a request path below the route (``rest``) and the client's query
        (the last few joined are kept: a client calls one endpoint over and over)."""
        key = (rest, query)
        joined = self._joined.get(key)
        if joined is None:
            if len(self._joined) >= URLS_KEPT:
                self._joined.clear()
            path = self.path.rstrip("/") + rest if rest not in ("", "/") or not self.path else self.path
            both = "&".join(q for q in (self.query, query) if q)
            joined = self._joined[key] = urlunsplit((self.scheme, self.netloc, path or "/", both, ""))
        return joined

    def scrub(self, text: str) -> str:
        """``text`` with every secret of the URL replaced: for errors and logs that quote the URL."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, SECRET)
        return text
