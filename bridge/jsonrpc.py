"""JSON-RPC 2.0 as every layer needs it: encoding, errors, one key per request id, and a cheap
look at a frame's id that decodes nothing.

The pipelines parse the frames they must read (once); transports that only need to know which
requests are in flight (stdio answers them when the child dies) use `ids_in`, which reads ids
off the bytes: one regex match settles a frame that starts the way most SDKs write one
(`{"jsonrpc":"2.0","id":…,"method"`), a few substring searches most others, and only frames it
cannot settle are read exactly (below `SLOW_LIMIT`, so memory stays flat): with msgspec, only
their top-level keys (a scan, nothing else built), else decoded.
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
    from msgspec import Raw, Struct
    from msgspec.json import Decoder
    from msgspec.json import decode as _fast_decode
    from msgspec.json import encode as _fast_encode
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
#: a request or a notification (a top-level `method`) whose own id, if it has one, the cheap look
#: could not tell from nested ones: never a response, so a reader of responses need not decode it
_SLOW_CALL = ("slow call", None)
_NOTHING = ("", None)
#: What follows a key: a string followed by a colon is one (a value is followed by `,` `}` `]`).
_COLON = re.compile(rb"\s*:")


def _key(line: bytes, name: bytes, start: int, end: int) -> int:
    """Where the key ``name`` (quoted) sits in ``line[start:end]``, -1 if nowhere; a string that
    only ends so (`"x\\"id"`) is no key: a `"` after a backslash is inside a string (in valid JSON
    an unescaped `"` before `id"` opens a string, and a string followed by a colon is a key)."""
    at = line.find(name, start, end)
    while at >= 0:
        after = at + len(name)
        if line[at - 1:at] != b"\\" and (line[after:after + 1] == b":" or _COLON.match(line, after) is not None):
            return at
        at = line.find(name, at + 1, end)
    return -1


def classify(line: bytes) -> tuple[str, bytes | None]:
    """("request" | "response", id token) of one frame without decoding it, from where its
    top-level `"id"` and `"method"` keys sit: the part before the first nested object (the head)
    holds only top-level keys, and so does the key right before the final `}` (where TypeScript
    SDKs put the id). ("", None) for frames with no `"id"` key beside the head's nested ones;
    ("slow", None) when unsure, as for ids after a nested value but not last: one of them may be
    the frame's own (`_decoded_ids` settles it); ("slow call", None) when unsure so but the head
    has `method`: a request or a notification, never a response.
    """
    start = 0
    while line[start:start + 1] in (b" ", b"\t", b"\r"):
        start += 1
    first = line[start:start + 1]
    if first != b"{":
        return _SLOW if first == b"[" else _NOTHING  # a batch, or not JSON-RPC
    inner = line.find(b"{", start + 1)
    head = len(line) if inner < 0 else inner
    at = _key(line, b'"id"', start, head)
    if at >= 0:
        match = _ID_VALUE.match(line, at)
    else:
        at = line.rfind(b'"id"', head)
        if at < 0:
            return _NOTHING  # a notification
        match = _ID_LAST.match(line, at) if line[at - 1:at] != b"\\" else None
        if match is None:  # ids nested in params or a result, and maybe its own among them
            return _SLOW_CALL if _key(line, b'"method"', start, head) >= 0 else _SLOW
    if match is None:
        return _SLOW
    if _key(line, b'"method"', start, head) >= 0:
        return "request", match.group(1)
    if _key(line, b'"result"', start, head) >= 0 or _key(line, b'"error"', start, head) >= 0:
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


if _fast_decode is not None:
    class _Keys(Struct):
        """The keys `ids_in` reads of a message, raw: msgspec skips the rest (params, results)
        without building it, so a frame `classify` cannot settle costs a scan, not a decode."""

        id: Raw = Raw()
        method: Raw = Raw()
        result: Raw = Raw()
        error: Raw = Raw()

    _decode_keys = Decoder(_Keys | list[_Keys]).decode


def _messages(line: bytes) -> list[tuple[bytes | None, bool, bool]]:
    """(id key or None, has `method`, has `result` or `error`) of each message of a frame, read
    exactly: through msgspec's key reader, else (or when msgspec refuses the frame: lone
    surrogates, NaN, nesting too deep) the stdlib decoder; [] for what is not JSON or too deep."""
    if _fast_decode is not None:
        try:
            read = _decode_keys(line)
        except (_Refused, RecursionError):  # too deep for it: the stdlib decides (and refuses it too)
            pass
        else:
            return [(_raw_key(bytes(m.id)), bool(m.method), bool(m.result or m.error))
                    for m in (read if isinstance(read, list) else [read])]
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return []
    return [(_id_spelling(m["id"]) if type(m.get("id")) in (str, int, float) else None, "method" in m,
             "result" in m or "error" in m) for m in (msg if isinstance(msg, list) else [msg]) if isinstance(m, dict)]


#: How an id that is a string or a number starts (not null, a boolean, an array, an object).
_ID_STARTS = frozenset(bytes([c]) for c in b'"-0123456789')


def _raw_key(raw: bytes) -> bytes | None:
    """The key of an id as written, if a request can have it."""
    return _plain(raw) if raw[:1] in _ID_STARTS else None


def _decoded_ids(line: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """The exact answer for frames `classify` could not settle (batches, unusual key orders, ids
    among nested values)."""
    if len(line) > SLOW_LIMIT:
        return
    for key, request, answer in _messages(line):
        if key is not None and (request or answer):
            yield ("request" if request else "response"), key, key


def one_id(block: bytes) -> tuple[str, bytes] | None:
    """(kind, id token) of a block that is one message starting the way most SDKs write one, in one
    regex match (the token is also its key); None for any other block: ask `ids_in`.

    A frame is asked about by several readers in turn (what it answers, whether it must be parsed):
    the last block's answer is kept, by identity (`bytes` only; the block it holds cannot be freed and
    its id reused)."""
    global _last_one
    last = _last_one
    if last[0] is block:
        return last[1]
    canonical = _CANONICAL.match(block)
    if canonical is None or block.find(b"\n") not in (-1, len(block) - 1):
        found = None
    else:
        token, kind = canonical.group(1, 2)
        found = _KINDS[kind], token
    if type(block) is bytes:  # immutable: never a buffer whose content changes under the same identity
        _last_one = (block, found)
    return found


_last_one: tuple[bytes, tuple[str, bytes] | None] = (b"", None)


def ids_in(block: bytes, requests: bool = True) -> Iterator[tuple[str, bytes, bytes]]:
    """(kind, key, token) of every request and response in a block of newline-separated frames:
    ``key`` is the same for a request and its response, ``token`` the id as written. Walks the
    block in place, without copying it; blocks without `"id"` cost one substring search. With
    ``requests`` false the caller wants only responses (and may be given requests too): a request
    or notification whose id the cheap look cannot place, such as a reminder notification carrying
    ids of its own, is then not decoded."""
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
            if kind == "slow" or (kind == "slow call" and requests):
                yield from _decoded_ids(line)
            elif kind and token is not None and token != b"null":
                yield kind, _plain(token), token
        pos = end + 1
