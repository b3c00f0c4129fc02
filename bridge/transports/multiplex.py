"""Many sessions over one stdio child (`serve`'s shared-child mode, docs/http.md): which session
each of the child's frames is for, and the ids that make that decidable.

Hosts pick their own request ids, and two of them (hostile or not) use the same ones. So every
request a session sends the child gets an id of the proxy's (`<prefix><tag>:<the id as the host
wrote it>`, a string: the session's tag and its id, no table to grow), and the child's answer
goes back to that session only, with the id exactly as the host wrote it. What else the child
says cannot be attributed: a request of the server's goes to the session that last asked
something (its answer is accepted from that session only), and a notification to the sessions
waiting for an answer at that moment, or to every session when none is; one stamped with a listen
request's id (MCP 2026-07-28 `_meta` subscriptionId) goes to the session that sent that request.

Pure: frames in, (session tag, frame) out. Only frames that carry an id (and cancellations,
which name one) are decoded; notifications pass as they came. A batch is decoded member by member.
"""
from __future__ import annotations

import json
import re
import secrets
from typing import Any

from bridge.jsonrpc import dumps, ids_in, loads

_CANCELLED = b"notifications/cancelled"
#: MCP 2026-07-28: the `_meta` key a listen stream's notifications carry its request's id under
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
_SUBSCRIPTION = SUBSCRIPTION_KEY.encode()
#: the server's requests still waiting for a host's answer, at most
ASKED_LIMIT = 10_000


def with_id(msg: dict[str, Any], token: bytes) -> bytes:
    """``msg`` encoded with ``token`` (an id exactly as written) as its id, `jsonrpc` and `id` first."""
    parts = [b'"jsonrpc":' + dumps(msg["jsonrpc"])] if "jsonrpc" in msg else []
    parts.append(b'"id":' + token)
    rest = {k: v for k, v in msg.items() if k not in ("jsonrpc", "id")}
    if rest:
        parts.append(dumps(rest)[1:-1])
    return b"{" + b",".join(parts) + b"}"


class SharedIds:
    """The sessions of one shared child, by tag, and the ids that route its answers to them."""

    def __init__(self, prefix: str | None = None) -> None:
        #: letters and digits, random per child: no host guesses another session's ids
        self.prefix = prefix or f"rbx{secrets.token_hex(4)}s"
        self._wrapped = re.compile(rb'"id"\s*:\s*"' + re.escape(self.prefix.encode()) + rb'(\d+):((?:[^"\\]|\\.)*)"')
        self._next = 0
        #: tag → how many of its requests the child has not answered yet
        self.inflight: dict[int, int] = {}
        #: the server's requests in flight at a host: id key → the tag it went to
        self.asked: dict[bytes, int] = {}
        self.last: int | None = None

    def join(self) -> int:
        """A new session: its tag."""
        self._next += 1
        self.inflight[self._next] = 0
        return self._next

    def leave(self, tag: int) -> None:
        self.inflight.pop(tag, None)
        self.asked = {key: t for key, t in self.asked.items() if t != tag}
        if self.last == tag:
            self.last = None

    # -- toward the child ------------------------------------------------------------------------
    def outbound(self, tag: int, frame: bytes) -> bytes | None:
        """A session's frame as the child gets it; None when it must not reach the child (an
        answer to a request the server did not send this session)."""
        found = list(ids_in(frame))
        if not found and _CANCELLED not in frame:
            return frame  # a notification: as it came
        msg = _decoded(frame)
        if isinstance(msg, list):
            members = [m for m in (self._out_member(tag, item, None) for item in msg) if m is not None]
            return b"[" + b",".join(members) + b"]" if members else None
        if not isinstance(msg, dict):
            return frame
        return self._out_member(tag, msg, found[0][2] if len(found) == 1 else None)

    def _out_member(self, tag: int, msg: Any, token: bytes | None) -> bytes | None:
        if not isinstance(msg, dict):
            return dumps(msg)
        if token is None and "id" in msg:
            token = _spelled(msg["id"])
        if "method" in msg and "id" in msg and msg["id"] is not None:  # a request: the proxy's id
            self.inflight[tag] = self.inflight.get(tag, 0) + 1
            self.last = tag
            return with_id(msg, dumps(self.wrap(tag, token or b"null")))
        if "method" not in msg and "id" in msg:  # an answer to the server's request: from the session it asked
            key = _spelled(msg["id"])
            if self.asked.get(key) != tag:
                return None
            del self.asked[key]
            return dumps(msg)
        params = msg.get("params")
        if msg.get("method") == "notifications/cancelled" and isinstance(params, dict) and "requestId" in params:
            self.inflight[tag] = max(0, self.inflight.get(tag, 0) - 1)  # the child answers it no more
            msg = {**msg, "params": {**params, "requestId": self.wrap(tag, _spelled(params["requestId"]))}}
        return dumps(msg)

    def wrap(self, tag: int, token: bytes) -> str:
        """The id the child sees for the request ``token`` (its id as written) of session ``tag``."""
        return f"{self.prefix}{tag}:{token.decode('latin-1')}"

    # -- from the child --------------------------------------------------------------------------
    def inbound(self, frame: bytes) -> list[tuple[int, bytes]]:
        """(tag, frame as that session's host gets it) for each session a frame of the child is for."""
        found = list(ids_in(frame))
        if not found:
            if _SUBSCRIPTION in frame:  # 2026-07-28: stamped with a listen request's id, so it is that session's
                stamped = self._stamped(frame)
                if stamped is not None:
                    return [stamped]
            return [(tag, frame) for tag in self._listeners()]
        msg = _decoded(frame)
        if isinstance(msg, list):
            by_tag: dict[int, list[bytes]] = {}
            for item in msg:
                for tag, data in self._in_member(item, None):
                    by_tag.setdefault(tag, []).append(data)
            return [(tag, b"[" + b",".join(parts) + b"]") for tag, parts in by_tag.items()]
        if not isinstance(msg, dict):
            return []
        return self._in_member(msg, frame if len(found) == 1 else None)

    def _in_member(self, msg: Any, frame: bytes | None) -> list[tuple[int, bytes]]:
        if not isinstance(msg, dict):
            return []
        data = frame if frame is not None else dumps(msg)
        msg_id = msg.get("id")
        if "method" in msg and msg_id is not None:  # the server asks: the session that last asked it
            tag = self.last if self.last in self.inflight else max(self.inflight, default=None)
            if tag is None:
                return []
            self.asked[_spelled(msg_id)] = tag
            if len(self.asked) > ASKED_LIMIT:  # a server that asks and forgets cannot grow this for ever
                del self.asked[next(iter(self.asked))]
            return [(tag, data)]
        if "method" in msg:
            return [(tag, data) for tag in self._listeners()]
        unwrapped = self.unwrap(msg_id)
        if unwrapped is None:
            return []  # an answer to nothing a session asked
        tag, token = unwrapped
        self.inflight[tag] = max(0, self.inflight[tag] - 1)
        return [(tag, with_id(msg, token))]

    def _stamped(self, frame: bytes) -> tuple[int, bytes] | None:
        """A notification stamped with a session's listen request (`_meta` subscriptionId): for that
        session only, with the id as its host wrote it."""
        msg = _decoded(frame)
        params = msg.get("params") if isinstance(msg, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        unwrapped = self.unwrap(meta.get(SUBSCRIPTION_KEY)) if isinstance(meta, dict) else None
        if unwrapped is None:
            return None
        tag, token = unwrapped
        try:
            original = json.loads(token)
        except ValueError:
            return None
        restamped = {**msg, "params": {**params, "_meta": {**meta, SUBSCRIPTION_KEY: original}}}
        return tag, dumps(restamped)

    def unwrap(self, msg_id: Any) -> tuple[int, bytes] | None:
        """(tag, the host's id as written) of an id `wrap` made for a session still here; else None."""
        if not isinstance(msg_id, str) or not msg_id.startswith(self.prefix):
            return None
        tag, colon, token = msg_id[len(self.prefix):].partition(":")
        if not colon or not tag.isdigit() or int(tag) not in self.inflight:
            return None
        return int(tag), token.encode("latin-1", "replace")

    def unwrap_head(self, head: bytes) -> tuple[int, bytes] | None:
        """The first bytes of a frame too long to read: (tag, those bytes with the host's id back)."""
        match = self._wrapped.search(head)
        if match is None or int(match.group(1)) not in self.inflight:
            return None
        try:
            token = json.loads(b'"' + match.group(2) + b'"').encode("latin-1", "replace")
        except ValueError:
            return None
        return int(match.group(1)), head[:match.start()] + b'"id":' + token + head[match.end():]

    def _listeners(self) -> list[int]:
        waiting = [tag for tag, n in self.inflight.items() if n]
        return waiting or list(self.inflight)


def _decoded(frame: bytes) -> Any:
    try:
        return loads(frame)
    except (ValueError, RecursionError):
        return None


def _spelled(msg_id: Any) -> bytes:
    try:
        return dumps(msg_id)
    except (TypeError, ValueError, UnicodeEncodeError):
        return json.dumps(msg_id).encode()
