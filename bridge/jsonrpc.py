"""JSON-RPC 2.0 as every layer needs it: encoding, errors, one key per request id, and a cheap
look at a frame's id that decodes nothing.

The pipelines parse the frames they must read (once); transports that only need to know which
requests are in flight (stdio answers them when the child dies) use `ids_in`, which reads ids
off the bytes: one regex match settles a frame that starts the way most SDKs write one
(`{"jsonrpc":"2.0","id":…,"method"`), a few substring searches most others, and only frames it
cannot settle are decoded (below `SLOW_LIMIT`, so memory stays flat).
"""
from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

#: A frame the cheap look cannot settle is decoded only below this size.
SLOW_LIMIT = 1024 * 1024

try:  # optional (`pip install 'reminder-bridge[fast]'`): decodes frames about 4 times faster
    from msgspec import MsgspecError as _Refused
    from msgspec.json import decode as _fast_decode, encode as _fast_encode
except ImportError:  # pragma: no cover - depends on the install
    _fast_decode = _fast_encode = None


def loads(frame: bytes) -> Any:
    """`json.loads(frame)`, through msgspec when it is installed. msgspec decodes every frame of the
    conversion vectors and the fuzz corpus to the same values, integers beyond 64 bits and key
    order included (docs/performance.md); what it refuses (lone surrogates, NaN, Infinity, a BOM,
    UTF-16) the stdlib decodes as before. Encoding: see `dumps`."""
    if _fast_decode is not None:
        try:
            return _fast_decode(frame)
        except _Refused:
            pass
    return json.loads(frame)


#: One encoder for every message: `json.dumps` with these options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
#: The C encoder `_ENCODER.encode` builds afresh for every call, built once (the same output).  No
#: circular-reference markers: a message is a tree decoded from JSON, and a cycle (a bug) still
#: fails, as a RecursionError.
_C_ENCODE = (c_make_encoder(None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True)
             if c_make_encoder is not None else None)


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8, non-ASCII kept as is (the way the proxy writes every message).

    A message of strings, integers, booleans, nulls, lists and string-keyed objects only (most of
    them: `_plain_tree`) goes through msgspec when it is installed, a fifth of the stdlib's cost:
    for those it writes the very bytes the stdlib writes (tests/unit/test_jsonrpc.py), and a lone
    surrogate fails alike (UnicodeEncodeError).  Anything else (a float above all: msgspec spells
    `1e+16` as `1e16` and NaN as null) is the stdlib's."""
    if _fast_encode is not None:
        try:
            plain = _plain_tree(obj)
        except RecursionError:  # deeper than the walk goes: the stdlib's own limit decides
            plain = False
        if plain:
            return _fast_encode(obj)
    if _C_ENCODE is None:  # pragma: no cover - a Python without the `_json` accelerator
        return _ENCODER.encode(obj).encode()
    return "".join(_C_ENCODE(obj, 0)).encode()


_LEAVES = frozenset((str, int, bool, type(None)))


def _plain_tree(value: Any) -> bool:
    """Only dicts with string keys, lists, strings, integers, booleans and None, exactly those types."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _LEAVES and not _plain_tree(item)):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) not in _LEAVES and not _plain_tree(item):
                return False
        return True
    return kind in _LEAVES


_SCALARS = frozenset((str, int, float, bool, type(None)))


def copied(value: Any) -> Any:
    """`copy.deepcopy` for a decoded message (dicts, lists, scalars), at a fraction of its cost: the
    flows copy a message before rewriting it.  Anything else is left to `copy.deepcopy`."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else copied(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else copied(v) for v in value]
    return value if kind in _SCALARS else copy.deepcopy(value)


def error_response(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def id_key(msg_id: Any) -> Any:
    """A dict key for a JSON-RPC id, or None for one no request can be matched by (null, arrays,
    objects: such responses pass untouched). 1 and "1" are different ids, and so are 1 and 1.0 on
    the wire, though Python hashes them alike."""
    if msg_id is None or isinstance(msg_id, (list, dict)):
        return None
    return (type(msg_id).__name__, msg_id)


def is_request(msg: dict[str, Any]) -> bool:
    return "method" in msg and "id" in msg and msg["id"] is not None


def is_response(msg: dict[str, Any]) -> bool:
    return "method" not in msg and "id" in msg


# -- the cheap look ------------------------------------------------------------------------------
_ID_TOKEN = rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|null)'
_ID_VALUE = re.compile(_ID_TOKEN)
_ID_LAST = re.compile(_ID_TOKEN + rb"\s*}\s*$")
#: `{"jsonrpc":"2.0","id":…,"method"|"result"|"error"`: how most SDKs start a message (one match settles it).
_CANONICAL = re.compile(rb'\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"[^"\\]*")\s*,\s*"(method|result|error)"')
_KINDS = {b"method": "request", b"result": "response", b"error": "response"}
_SLOW = ("slow", None)  # the cheap look could not tell: decode this frame
_NOTHING = ("", None)


def classify(line: bytes) -> tuple[str, bytes | None]:
    """("request" | "response", id token) of one frame without decoding it, from where its
    top-level `"id"` and `"method"` keys sit: the part before the first nested object (the head)
    holds only top-level keys, and so does the key right before the final `}` (where TypeScript
    SDKs put the id). ("", None) for frames with no id; ("slow", None) when unsure.
    """
    start = 0
    while line[start:start + 1] in (b" ", b"\t", b"\r"):
        start += 1
    first = line[start:start + 1]
    if first != b"{":
        return _SLOW if first == b"[" else _NOTHING  # a batch, or not JSON-RPC
    inner = line.find(b"{", start + 1)
    head = len(line) if inner < 0 else inner
    at = line.find(b'"id"', start, head)
    if at >= 0:
        match = _ID_VALUE.match(line, at)
    else:
        at = line.rfind(b'"id"', head)
        if at < 0:
            return _NOTHING  # a notification
        match = _ID_LAST.match(line, at)
        if match is None:  # an id inside params or a result: a notification, unless the head says response
            responds = line.find(b'"result"', start, head) >= 0 or line.find(b'"error"', start, head) >= 0
            return _SLOW if responds else _NOTHING
    if match is None:
        return _SLOW
    if line.find(b'"method"', start, head) >= 0:
        return "request", match.group(1)
    if line.find(b'"result"', start, head) >= 0 or line.find(b'"error"', start, head) >= 0:
        return "response", match.group(1)
    return _SLOW


def _plain(token: bytes) -> bytes:
    """An id token in one spelling per JSON value, the key requests and responses are matched by:
    digits and escape-free strings are already canonical (and `1` is not `"1"`)."""
    if token.isdigit() or (token[:1] == b'"' and b"\\" not in token):
        return token
    return _id_spelling(json.loads(token))


def _id_spelling(msg_id: Any) -> bytes:
    """``msg_id`` as compact JSON; a string with a lone surrogate (valid JSON, which UTF-8 cannot
    carry) escaped, the same way for a request and its response."""
    try:
        return dumps(msg_id)
    except UnicodeEncodeError:
        return json.dumps(msg_id, separators=(",", ":")).encode()


def wire_key(msg_id: Any) -> bytes | None:
    """The ``key`` `ids_in` gives for a frame with this id (a request's id, to know its response
    by the id alone), or None for an id it never gives (null, booleans, arrays, objects)."""
    kind = type(msg_id)
    if kind is int:
        return b"%d" % msg_id  # what the encoder writes, without it
    if kind is str and '"' not in msg_id and "\\" not in msg_id and msg_id.isprintable():
        return b'"' + msg_id.encode() + b'"'  # nothing in it is escaped
    if kind is bool or not isinstance(msg_id, (str, int, float)):
        return None
    return _id_spelling(msg_id)


def _decoded_ids(line: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """The exact answer for frames `classify` could not settle (batches, unusual key orders)."""
    if len(line) > SLOW_LIMIT:
        return
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return
    for item in msg if isinstance(msg, list) else [msg]:
        if isinstance(item, dict) and isinstance(item.get("id"), (str, int, float)) and not isinstance(item["id"], bool):
            token = _id_spelling(item["id"])
            if "method" in item:
                yield "request", token, token
            elif "result" in item or "error" in item:
                yield "response", token, token


def one_id(block: bytes) -> tuple[str, bytes] | None:
    """(kind, id token) of a block that is one message starting the way most SDKs write one, in one
    regex match (the token is also its key); None for any other block: ask `ids_in`."""
    canonical = _CANONICAL.match(block)
    if canonical is None or block.find(b"\n") not in (-1, len(block) - 1):
        return None
    token, kind = canonical.group(1, 2)
    return _KINDS[kind], token


def ids_in(block: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """(kind, key, token) of every request and response in a block of newline-separated frames:
    ``key`` is the same for a request and its response, ``token`` the id as written. Walks the
    block in place, without copying it; blocks without `"id"` cost one substring search."""
    one = one_id(block)
    if one is not None:  # the usual: one message
        yield one[0], one[1], one[1]
        return
    if b'"id"' not in block:
        return
    pos, size = 0, len(block)
    while pos < size:
        end = block.find(b"\n", pos)
        if end < 0:
            end = size
        canonical = _CANONICAL.match(block, pos, end)
        if canonical is not None:
            token, kind = canonical.group(1, 2)
            yield _KINDS[kind], token, token
        elif block.find(b'"id"', pos, end) >= 0:
            line = block[pos:end]
            kind, token = classify(line)
            if kind == "slow":
                yield from _decoded_ids(line)
            elif kind and token is not None and token != b"null":
                yield kind, _plain(token), token
        pos = end + 1
