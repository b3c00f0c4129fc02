"""The host's requests the peer has not answered yet, so that an upstream that goes away leaves
none of them waiting (spec §8.3): the flow notes them as it sees frames (`Flow.unanswered`), and
answers each with an error once the transport says the upstream is gone (`Flow.upstream_gone`).

Ids are read off the bytes, never decoded (`bridge.jsonrpc.ids_in`): a host frame costs one
regex match, and a peer frame is looked at only while something is in flight. Only a
cancellation (`notifications/cancelled`: MCP servers answer no cancelled request) is decoded.
"""
from __future__ import annotations

import itertools
import json
import re
from typing import Any

from bridge.jsonrpc import SLOW_LIMIT, dumps, error_response, ids_in, one_id, wire_key
from bridge.pipeline.commands import HOST, Reply


def token_key(token: bytes) -> Any:
    """The `jsonrpc.id_key` of an id as written (a token from `ids_in`), decoding only what
    is not plain digits or an escape-free string."""
    if token.isdigit():
        return ("int", int(token))
    try:
        if token[:1] == b'"' and b"\\" not in token:
            return ("str", token[1:-1].decode())
        value = json.loads(token)
    except ValueError:  # not UTF-8: no request of the host's is matched by it
        return None
    return (type(value).__name__, value)


class Unanswered:
    """Ids of the host's requests no response has come back for, in the order they were sent."""

    LIMIT = 10_000  # a peer that never answers cannot grow this without bound: the oldest half goes

    __slots__ = ("ids", "own")

    def __init__(self, own: bytes = b"") -> None:
        #: canonical id (`ids_in`'s key) → the id exactly as the host wrote it
        self.ids: dict[bytes, bytes] = {}
        #: the quoted prefix of the proxy's own ids: their answers go to the flow, never to the host
        self.own = b'"' + own if own else b"\x00"

    def asked(self, block: bytes) -> None:
        """Frames from the host (one, or a block of lines): remember the requests in them, and
        forget the ones the host cancels."""
        one = one_id(block)
        if one is not None:  # one message written the usual way: no cancellation (it has an id)
            if one[0] == "request" and not one[1].startswith(self.own):
                self._add(one[1], one[1])
            return
        for kind, key, token in ids_in(block):
            if kind == "request" and key != b"null" and not key.startswith(self.own):
                self._add(key, token)
        if self.ids and b"s/cancelled" in block:  # after the requests: a cancel follows what it cancels
            self._cancelled(block)

    def _add(self, key: bytes, token: bytes) -> None:
        ids = self.ids
        ids[key] = token
        if len(ids) > self.LIMIT:
            for old in list(itertools.islice(ids, self.LIMIT // 2)):
                del ids[old]

    def answered(self, block: bytes) -> Any:
        """Frames toward the host: forget the requests they answer. Returns the id key of the
        request answered when ``block`` is one response to a request noted here, else None."""
        ids = self.ids
        if not ids:
            return None
        one = one_id(block)
        if one is not None:
            return token_key(one[1]) if one[0] == "response" and ids.pop(one[1], None) is not None else None
        found: Any = None
        for kind, key, token in ids_in(block, requests=False):
            if kind == "response" and ids.pop(key, None) is not None:
                found = token_key(token) if found is None else False
        return found or None

    def drop(self, block: bytes) -> None:
        """Wait no longer for the requests in ``block``, answered or not."""
        if self.ids:
            for kind, key, _ in ids_in(block):
                if kind == "request":
                    self.ids.pop(key, None)

    def waiting_in(self, block: bytes) -> bool:
        """Whether a request in ``block`` still waits for its response."""
        return bool(self.ids) and any(kind == "request" and key in self.ids for kind, key, _ in ids_in(block))

    def forget(self, msg_id: Any) -> None:
        """The proxy answered the request ``msg_id`` itself (a `Reply`): nothing waits for it."""
        if self.ids and (key := wire_key(msg_id)) is not None:
            self.ids.pop(key, None)

    def _cancelled(self, block: bytes) -> None:
        for line in block.split(b"\n"):
            if b"notifications/cancelled" in line and len(line) <= SLOW_LIMIT:
                try:
                    key = wire_key(json.loads(line)["params"]["requestId"])
                    if key is not None:
                        self.ids.pop(key, None)
                except (ValueError, RecursionError, LookupError, TypeError):
                    pass

    def errors(self, error: dict[str, Any], block: bytes | None = None) -> list[tuple[bytes, bytes]]:
        """(id as written, response) for every request still waiting, in the order they were sent,
        then forget them; ``block``: only those the host sent in it. ``error`` is the JSON-RPC
        error object each gets; its id goes back exactly as the host wrote it."""
        if block is None:
            waiting = list(self.ids.items())
            self.ids.clear()
        else:
            keys = dict.fromkeys(key for kind, key, _ in ids_in(block) if kind == "request")
            waiting = [(key, token) for key in keys if (token := self.ids.pop(key, None)) is not None]
        body = dumps(error)
        return [(token, b'{"jsonrpc":"2.0","id":' + token + b',"error":' + body + b"}") for _, token in waiting]


class Answering:
    """What a flow answers in the peer's place when the peer cannot (mixed into `Flow`, whose
    `unanswered` table it reads): the transport says what happened, never which ids it read."""

    unanswered: Unanswered

    def upstream_gone(self, error: dict[str, Any], frame: bytes | None = None) -> list[Reply]:
        """The peer went away (a child exited, an upstream failed or broke off its answer): ``error``
        (a JSON-RPC error object) for each host request still unanswered, ``frame``: of those it
        carried, in the order they were sent, each id as the host wrote it."""
        return [Reply(HOST, data, json.loads(token)) for token, data in self.unanswered.errors(error, frame)]

    def awaits(self, frame: bytes) -> bool:
        """Whether a host request of ``frame`` is still unanswered: an HTTP transport whose answer
        stream ended asks before it resumes the stream or gives up on it (`upstream_gone`)."""
        return self.unanswered.waiting_in(frame)

    def exchange_ended(self, frame: bytes) -> None:
        """The transport's exchange for the host's ``frame`` is over (HTTP: its response ended):
        its requests wait no longer, answered or not, so a flow whose answers go elsewhere (a raw
        relay, a 202) keeps nothing of them."""
        self.unanswered.drop(frame)

    def oversize(self, head: bytes, origin: str, limit: int) -> list[Reply]:
        """A frame from ``origin`` over the transport's ``limit``, of which only ``head`` (its first
        bytes) was kept: a host request gets an error, a peer response becomes one (the host stops
        waiting); anything else is gone unanswered."""
        found = oversize_reply(head, limit, origin == HOST)
        if found is None:
            return []
        msg_id, data = found
        self.unanswered.forget(msg_id)
        return [Reply(HOST, data, msg_id)]


_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def oversize_reply(head: bytes, limit: int, from_host: bool) -> tuple[Any, bytes] | None:
    """(id, JSON-RPC error) for an oversize message whose id can be read from its first bytes: a
    request from the host is answered; a response from the peer becomes an error so the host stops
    waiting. None when neither applies."""
    is_request = b'"method"' in head
    if is_request != from_host:
        return None
    match = _ID.search(head)
    if match is None:
        return None
    msg_id = json.loads(match.group(1))
    what = "message" if from_host else "response from the server or agent"
    return msg_id, dumps(error_response(msg_id, -32600,
                                        f"{what} larger than the proxy's line limit of {limit} bytes",
                                        {"limit": limit}))


def detect_protocol(frame: bytes) -> str:
    """MCP or ACP, from the host's first message: ACP's `initialize` carries an integer version."""
    try:
        msg = json.loads(frame)
    except (ValueError, RecursionError):
        return "mcp"
    params = msg.get("params") if isinstance(msg, dict) else None
    if isinstance(params, dict) and msg.get("method") == "initialize":
        if isinstance(params.get("protocolVersion"), int) or "clientCapabilities" in params:
            return "acp"
    return "mcp"
