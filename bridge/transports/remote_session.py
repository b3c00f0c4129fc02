"""What `stdio --upstream` keeps of its HTTP upstream between requests, sans-I/O: the MCP session the
server named, the headers each request carries, which transport the server speaks (Streamable HTTP,
or the 2024-11-05 HTTP+SSE one), and where a server-sent stream picks up after it broke.

No socket here (`bridge.transports.remote` performs the requests), so each rule is tested alone.
"""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

from bridge.jsonrpc import classify
from bridge.transports.forwarding import Upstream, with_own
from bridge.transports.remote_kinds import AUTO, LEGACY_SSE, STREAMABLE
from bridge.transports.sse import Event

SESSION_HEADER = "Mcp-Session-Id"
LAST_EVENT_ID = "Last-Event-ID"
#: What a POST accepts (Streamable HTTP answers with JSON or a stream) and what a GET stream does.
POST_ACCEPT = "application/json, text/event-stream"
STREAM_ACCEPT = "text/event-stream"
#: What a 2024-11-05 server's SSE URL answers a POST with (its messages go to another endpoint);
#: a Streamable HTTP endpoint takes POSTs. `auto` falls back on these, at the first POST only.
FALLBACK_STATUSES = frozenset({404, 405})
#: How long to wait before a broken stream is resumed, unless the server said (SSE `retry`).
DEFAULT_RETRY_S = 1.0
_BLANKS = bytes.maketrans(b"\r\n", b"  ")


def one_line(data: bytes) -> bytes:
    """A JSON message on one line, for the host's stdio. A line end in JSON text can only be
    whitespace between tokens (strings escape theirs), so blanking it changes no value; a message
    that has none is the very bytes object it was."""
    if b"\n" in data or b"\r" in data:
        return data.translate(_BLANKS)
    return data


class Resume:
    """Where a server-sent stream picks up after it broke: its last event id (sent back as
    `Last-Event-ID`), and how long the server asked clients to wait first (SSE `retry`)."""

    __slots__ = ("last_id", "retry_s")

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.retry_s = DEFAULT_RETRY_S

    def saw(self, event: Event) -> None:
        for name, value in event.fields:
            if name == b"id" and b"\x00" not in value:  # an empty id resets it (the SSE rule)
                self.last_id = value.decode(errors="replace") or None
            elif name == b"retry" and value.isdigit():
                self.retry_s = int(value) / 1000


class RemoteSession:
    """One host's conversation with the upstream: the URL, the route's own headers (auth), the
    session id the server's answer to `initialize` named, and, for a 2024-11-05 server, the
    endpoint its stream named for POSTs.

    ``transport``: `auto` POSTs to the URL and falls back to the 2024-11-05 transport when the first
    POST is refused as a GET-only SSE URL is (a URL whose path ends in `/sse` is taken as one at once)."""

    def __init__(self, target: Upstream, transport: str = AUTO):
        self.target = target
        self.url = target.url("", "")
        if transport == AUTO and urlsplit(self.url).path.rstrip("/").endswith("/sse"):
            transport = LEGACY_SSE
        self.transport = transport
        self.session_id: str | None = None
        #: 2024-11-05: where the host's messages are POSTed (the stream's `endpoint` event)
        self.endpoint: str | None = None
        #: the host's messages that opened the session, as POSTed: its first (`initialize`) and the
        #: notification right after it (`notifications/initialized`), replayed when the server loses it
        self.opening: list[bytes] = []
        self._opened = False  # the opening is complete: a request other than the first went out

    @property
    def legacy(self) -> bool:
        """The server speaks the 2024-11-05 HTTP+SSE transport: answers come on its stream."""
        return self.transport == LEGACY_SSE

    @property
    def listens(self) -> bool:
        """Whether a GET stream for the server's own messages is worth opening: a Streamable HTTP
        server that gave a session (a sessionless one has no stream to offer)."""
        return self.transport != LEGACY_SSE and self.session_id is not None

    def posting(self, frame: bytes) -> bool:
        """The host's ``frame`` is POSTed: its first, and a notification right after it, open the
        session (MCP's handshake: `initialize`, then `notifications/initialized`; a frame with no
        id is a notification, told by the cheap look, not decoded). True for that notification:
        the handshake is complete once it is POSTed."""
        if self._opened:
            return False
        if not self.opening:
            self.opening.append(frame)
            return False
        self._opened = True
        if classify(frame)[0] == "":
            self.opening.append(frame)
            return True
        return False

    def lost(self, sent: str | None) -> bool:
        """The server answered 404 to a request that carried the session ``sent`` (MCP: it no longer
        knows it). True when the session is to be opened again with the host's own opening: the
        session is still that one (not already opened again by another request), and the opening
        is known and was not itself what the server refused."""
        if sent is None or sent != self.session_id or self.legacy or not self.opening:
            return False
        self.session_id = None  # the replayed `initialize` goes without one, as the first did
        return True

    def post_url(self) -> str:
        return self.endpoint if self.legacy and self.endpoint else self.url

    def headers(self, mirrored: Mapping[str, str] | None = None, *, stream: bool = False,
                last_event_id: str | None = None) -> dict[str, str]:
        """A request's headers: what it accepts, the session, where a stream resumes, what the
        protocol mirrors of the message (``mirrored``), then the route's own in place of any of
        the same name."""
        out = {"Accept": STREAM_ACCEPT} if stream else {"Accept": POST_ACCEPT, "Content-Type": "application/json"}
        if self.session_id and not self.legacy:
            out[SESSION_HEADER] = self.session_id
        if last_event_id:
            out[LAST_EVENT_ID] = last_event_id
        if mirrored:
            out.update(mirrored)
        return with_own(out, self.target.own) if self.target.own else out

    def answered(self, status: int, headers: Mapping[str, str], first: bool) -> bool:
        """A POST's answer arrived: keep the session it names; at the ``first`` POST, settle the
        transport. True when that POST must go again, to the 2024-11-05 transport (`auto` only)."""
        if first and self.transport == AUTO:
            if status in FALLBACK_STATUSES and self.session_id is None:
                self.transport = LEGACY_SSE
                return True
            self.transport = STREAMABLE
        if 200 <= status < 300 and not self.legacy and (session := headers.get(SESSION_HEADER)):
            self.session_id = session
        return False

    def endpoint_from(self, event: Event) -> bool:
        """A 2024-11-05 stream's `endpoint` event: where to POST, relative to the stream's URL.
        One on another origin is refused (the host's messages go nowhere but the upstream named)."""
        if (b"event", b"endpoint") not in event.fields or not event.data:
            return False
        url = urljoin(self.url, event.data.decode(errors="replace").strip())
        there, here = urlsplit(url), urlsplit(self.url)
        if (there.scheme, there.netloc) != (here.scheme, here.netloc):
            return False
        self.endpoint = url
        return True

    def ended(self) -> None:
        """The session is over (deleted, or the server no longer knows it)."""
        self.session_id = None
