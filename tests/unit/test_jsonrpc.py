"""`bridge.jsonrpc`'s cheap look at a frame: `classify` tells a request from a response and reads its
id off the bytes, and `ids_in` gives every request and response of a block one key per id value, so
a response finds its request however either side spelled the id. Hostile ids (huge, escaped, lone
surrogates, the wrong JSON type) are either keyed exactly or left alone, never misread.

And spec §8 through the JSON decoder the proxy uses (`loads`: msgspec when `[fast]` is installed,
else the stdlib): values a rewrite carries on come out as they went in: integers beyond 64 bits,
key order, lone surrogates, NaN, number spellings the stdlib would keep."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge import jsonrpc
from bridge.jsonrpc import SLOW_LIMIT, classify, ids_in, loads, wire_key
from tests.flows import make_flow


def request(msg_id, **extra) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", **extra}).encode()


def keys(block: bytes) -> list[tuple[str, bytes]]:
    return [(kind, key) for kind, key, _ in ids_in(block)]


@pytest.mark.parametrize("frame, expected", [
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', ("request", b"1")),
    (b'{"jsonrpc":"2.0","id":"a","result":{}}', ("response", b'"a"')),
    (b'{"jsonrpc":"2.0","id":-3,"error":{"code":-1,"message":"x"}}', ("response", b"-3")),
    (b' \t{"id" : 7 , "method":"m"}', ("request", b"7")),  # spaces anywhere JSON allows them
    # where TypeScript SDKs put it: last, after nested params or a result that hold ids of their own
    (b'{"jsonrpc":"2.0","method":"m","params":{"a":{"id":5}},"id":7}', ("request", b"7")),
    (b'{"jsonrpc":"2.0","result":{"id":9},"id":2}', ("response", b"2")),
    (b'{"jsonrpc":"2.0","id":2,"result":{"id":9}}', ("response", b"2")),
])
def test_requests_and_responses_are_told_apart_with_their_id_as_written(frame, expected):
    assert classify(frame) == expected


@pytest.mark.parametrize("frame", [
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","method":"m","params":{"s":"\\"id\\": 1"}}',  # "id" inside a string is no key
    b'{"\\"id":5,"method":"m"}',  # nor is a key that ends so
    b"hello", b"", b"\x00\xff", b'"id":1',  # not a JSON-RPC object at all
])
def test_notifications_and_non_objects_have_no_id(frame):
    assert classify(frame) == ("", None)
    assert keys(frame) == []


@pytest.mark.parametrize("frame", [
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3}}',  # an id in params is not its own
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"_meta":{"harn":{"reminder":{"id":"r"}}}}}',
    b'{"jsonrpc":"2.0","method":"m","params":{"id":1},"id":true,"x":1}',  # its own, but no request has it
    b'{"jsonrpc":"2.0","method":"m","params":{},"x\\"id":5}',  # a key that only ends in "id"
])
def test_ids_nested_after_the_head_are_looked_at_and_found_not_its_own(frame):
    """Whether an id after a nested value is the frame's own takes reading the nesting: the frame
    is said to be slow and its keys read exactly, never guessed. With a `method` in its head it is
    a request or a notification, never a response: a reader of responses skips the read."""
    assert classify(frame) == ("slow call", None)
    assert keys(frame) == []
    assert list(ids_in(frame, requests=False)) == []


def test_a_reader_of_responses_skips_only_calls_and_still_sees_every_response():
    """`requests=False` leaves out the read of a call whose id is unplaced, so a reminder
    notification during a tool call costs no decode; a request it skips is one it did not want."""
    call = b'{"jsonrpc":"2.0","method":"m","params":{"id":1},"id":5,"x":1}'
    answer = b'{"result":{"id":1},"jsonrpc":"2.0","id":4,"more":1}'
    block = call + b"\n" + answer
    assert [(k, key) for k, key, _ in ids_in(block)] == [("request", b"5"), ("response", b"4")]
    assert [(k, key) for k, key, _ in ids_in(block, requests=False)] == [("response", b"4")]


@pytest.mark.parametrize("frame", [
    b'[{"jsonrpc":"2.0","id":1,"method":"m"}]',  # a batch
    b'{"jsonrpc":"2.0","id":true,"method":"m"}', b'{"jsonrpc":"2.0","id":[1],"method":"m"}',
    b'{"jsonrpc":"2.0","id":{"a":1},"method":"m"}',
    b'{"result":{"x":1},"jsonrpc":"2.0","id":4,"more":1}',  # a response whose id the head does not show
])
def test_what_the_cheap_look_cannot_settle_is_said_so(frame):
    assert classify(frame) == ("slow", None)


def test_a_request_and_its_response_share_one_key_however_each_spells_the_id():
    pairs = [(b'"\\u0041"', b'"A"'), (b'1e2', b'100.0'), (b'"caf\\u00e9"', '"café"'.encode()),
             (b'"a\\"b"', b'"a\\u0022b"')]
    for asked, answered in pairs:
        [(_, request_key, token)] = ids_in(b'{"jsonrpc":"2.0","id":' + asked + b',"method":"m"}')
        [(_, response_key, _)] = ids_in(b'{"jsonrpc":"2.0","id":' + answered + b',"result":{}}')
        assert request_key == response_key, (asked, answered)
        assert token == asked  # what an error answer repeats: the id exactly as the host wrote it


def test_ids_equal_in_python_but_not_on_the_wire_get_different_keys():
    one = [key for _, key in keys(b"\n".join([request(1), request("1"), request(1.0)]))]
    assert len(set(one)) == 3


def test_huge_and_escaped_ids_are_keyed_exactly():
    huge = b"1" + b"0" * 400  # no float rounds it: the digits are the key
    assert keys(b'{"jsonrpc":"2.0","id":' + huge + b',"method":"m"}') == [("request", huge)]
    control = request("a\x00\x1b[2J\x07")  # control characters, escaped as JSON must
    assert keys(control) == [("request", b'"a\\u0000\\u001b[2J\\u0007"')]
    long_id = "x" * 100_000
    assert keys(request(long_id)) == [("request", json.dumps(long_id).encode())]


def test_a_lone_surrogate_id_is_keyed_alike_on_both_sides():
    """Valid JSON that UTF-8 cannot carry: keyed escaped, never a crash (spec §10: hostile ids)."""
    [(_, asked, token)] = ids_in(b'{"jsonrpc":"2.0","id":"\\ud800x","method":"m"}')
    [(_, answered, _)] = ids_in(b'{"jsonrpc":"2.0","result":{},"id":"\\uD800x"}')
    assert asked == answered and token == b'"\\ud800x"'
    [(_, batched, _)] = ids_in(b'[{"jsonrpc":"2.0","id":"\\ud800x","method":"m"}]')
    assert batched == asked


def test_ids_no_request_can_be_matched_by_are_left_alone():
    for msg_id in (None, True, False, [1], {"a": 1}):
        assert keys(request(msg_id)) == []
        assert keys(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {}}).encode()) == []


def test_a_block_gives_every_request_and_response_in_order():
    block = b"\n".join([
        request(1),
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3}}',
        b"not json",
        b'{"jsonrpc":"2.0","id":"b","result":{}}',
        b'[{"jsonrpc":"2.0","id":2,"method":"m"},{"jsonrpc":"2.0","id":"c","error":{"code":1,"message":"x"}}]',
        b'{"params":{},"method":"m","id":4}',
    ]) + b"\n"
    assert keys(block) == [("request", b"1"), ("response", b'"b"'), ("request", b"2"), ("response", b'"c"'),
                           ("request", b"4")]


def test_a_frame_nested_too_deep_to_decode_has_no_id_rather_than_an_error():
    deep = b'{"jsonrpc":"2.0","method":"m","params":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b',"id":5,"x":1}'
    assert keys(deep) == []
    lists = b'{"jsonrpc":"2.0","method":"m","params":' + b"[" * 50_000 + b"]" * 50_000 + b',"id":5,"x":1}'
    assert keys(lists) in ([], [("request", b"5")])  # what each decoder can read, it reads exactly


def test_a_frame_too_large_to_decode_is_not_decoded():
    """What the cheap look cannot settle is decoded only below SLOW_LIMIT: memory stays flat."""
    big_batch = b'[{"jsonrpc":"2.0","id":1,"method":"m","params":{"pad":"' + b"x" * SLOW_LIMIT + b'"}}]'
    assert keys(big_batch) == []
    big_request = request(1, params={"pad": "x" * SLOW_LIMIT})  # one the cheap look settles: any size
    assert keys(big_request) == [("request", b"1")]


@pytest.mark.parametrize("frame", [
    b'{"jsonrpc":"2.0","method":"m","params":{},"id":5,"x":1}',
    b'{"params":{"x":1},"id":5,"method":"m"}',
    b'{ "method" : "m" , "params" : { "id" : 1 } , "id" : 5 , "x" : [ ] }',
    # strings in params holding braces, brackets, quotes, escapes and ids of their own
    b'{"jsonrpc":"2.0","method":"m","params":{"s":"}]{\\"id\\":1,"},"id":5}',
    b'{"jsonrpc":"2.0","method":"m","params":{"s":"\\"id\\":9}"},"id":5,"x":1}',
    b'{"jsonrpc":"2.0","method":"m","params":{"s":"x\\\\"},"id":5,"z":[]}',  # a string ending in a backslash
    b'{"jsonrpc":"2.0","method":"m","params":{"s":"{\\u0022id\\u0022:7}","id":6},"id":5,"x":{}}',
    b'{"jsonrpc":"2.0","x":"id","id":5,"method":"m"}',  # "id" as a value before the key
    b'{"jsonrpc":"2.0","method":"m","params":{"s":"\\ud800"},"id":5,"x":1}',  # what msgspec refuses
])
def test_a_request_whose_id_sits_between_nested_params_and_another_key_is_seen(frame):
    assert keys(frame) == [("request", b"5")]


@pytest.mark.parametrize("frame", [
    b'{"jsonrpc":"2.0","result":{"id":9},"id":2,"x":1}',
    b'{"jsonrpc":"2.0","id":2,"x":"method","result":{}}',  # "method" as a value is no request
    b'{"jsonrpc":"2.0","error":{"code":1,"message":"}\\"id\\":3"},"id":2,"data":null}',
])
def test_a_response_whose_id_sits_among_nested_values_is_seen(frame):
    assert keys(frame) == [("response", b"2")]


_TEXT = st.text(alphabet=st.sampled_from('{}[]"\\:,id \u00e9\ud800x'), max_size=8)
_NESTED = st.recursive(st.none() | st.booleans() | st.integers() | _TEXT,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["id", "method", "result", '"id', "id\\", "x"]) | _TEXT, inner,
                           max_size=3), max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(members=st.dictionaries(st.sampled_from(["jsonrpc", "method", "params", "result", "error", "x", "y"]), _NESTED,
                               max_size=5),
       msg_id=st.none() | st.integers() | _TEXT, where=st.integers(min_value=0, max_value=5), spaced=st.booleans(),
       stdlib=st.booleans())
def test_the_cheap_look_agrees_with_the_decoder_wherever_the_id_sits(members, msg_id, where, spaced, stdlib,
                                                                      monkeypatch_module):
    """Any key order, ids nested at any depth, strings of braces, quotes and escapes: `ids_in`
    gives what decoding the frame says, with msgspec's key reader or the stdlib's decoder."""
    if "method" in members:  # one message that both asks and answers is no JSON-RPC: left out
        members.pop("result", None)
        members.pop("error", None)
    items = list(members.items())
    if msg_id is not None or where % 2:
        items.insert(where % (len(items) + 1), ("id", msg_id))
    frame = json.dumps(dict(items), separators=(", ", " : ") if spaced else (",", ":")).encode()
    monkeypatch_module.setattr(jsonrpc, "_fast_decode", None if stdlib else jsonrpc._fast_decode)
    msg = json.loads(frame)
    expected = []
    if type(msg.get("id")) in (int, str) and ("method" in msg or "result" in msg or "error" in msg):
        expected = [("request" if "method" in msg else "response", wire_key(msg["id"]))]
    assert keys(frame) == expected, frame


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize("msg_id", [7, -5, 10**30, 1.5, "abc", 'a"b', "a\\b", "é", "\u2028", "tab\there", "x\ud800"])
def test_wire_key_is_the_key_ids_in_gives_for_the_response(msg_id):
    response = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {}}).encode()
    assert [key for kind, key, _ in ids_in(response) if kind == "response"] == [wire_key(msg_id)]


# -- spec §8: what the decoder keeps ----------------------------------------------------------------
EDGES = [
    b'{"n":18446744073709551617,"m":-1180591620717411303424,"id":123456789012345678901234567890}',
    b'{"z":1,"a":2,"m":{"y":1,"b":2}}',
    b'{"k":1,"k":2}',
    b'{"s":"\\ud800 lone high","t":"lone low \\udc00","pair":"\\ud83d\\ude00"}',
    b'{"f":1.0,"g":1e16,"h":1E2,"i":-0,"j":0.1,"k":5e-324,"l":-0.0}',
    b'{"big":1e400,"nan":NaN,"inf":-Infinity}',
    '{"t":"\u2028 \u00e9 \U0001f600 \x7f"}'.encode(),
    b'\xef\xbb\xbf{"bom":1}',
]


def same(a, b) -> bool:
    """Equal values of equal types, NaN equal to NaN, key order included."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b or (isinstance(a, float) and math.copysign(1, a) == math.copysign(1, b) and a == b)


@pytest.mark.parametrize("frame", EDGES)
def test_frames_decode_to_the_values_the_stdlib_gives(frame):
    assert same(loads(frame), json.loads(frame))


def test_a_rewrite_carries_big_integers_and_key_order_of_unknown_fields_as_they_came():
    flow = make_flow("mcp", host_dialect="standard", peer_dialect="legacy", peer_declared=True)
    frame = (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"harn.reminder",'
             b'"data":"b","_meta":{"zeta":18446744073709551617,"alpha":{"y":-1180591620717411303424,"b":1e16},'
             b'"harn":{"reminder":{"id":"r1","body":"b"}}}}}')
    [out] = flow.from_peer(frame)
    assert out.data is not frame
    assert (b'"_meta":{"zeta":18446744073709551617,"alpha":{"y":-1180591620717411303424,"b":1e+16}}'
            in out.data)


def _stdlib(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("value", [
    {"jsonrpc": "2.0", "id": 7, "method": "m", "params": {"z": [1, True, None, {"y": "x"}], "a": {}}},
    {"n": 18446744073709551617, "m": -1180591620717411303424, "k": 2**63, "j": -2**63 - 1, "b": False},
    {"every": "".join(chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000)},
    {"astral": "\U0001f600\U0010ffff", "sep": "\u2028\u2029", "bom": "\ufeff", "ctl": "\x00\x1f\x7f\"\\/"},
    [], {}, "s", 0, None,
    # not plain trees: the stdlib writes them
    {"f": 1e16, "g": 0.1, "h": -0.0}, {"nan": float("nan"), "inf": float("-inf")}, {1: "int key", None: 2},
    {"t": (1, 2)}, [1.5],
])
def test_dumps_writes_what_the_stdlib_writes(value):
    """`dumps` takes msgspec for plain trees (when installed) and the stdlib for the rest: the
    same bytes either way."""
    from bridge.jsonrpc import dumps

    assert dumps(value) == _stdlib(value)


def test_dumps_fails_on_a_lone_surrogate_as_the_stdlib_does():
    from bridge.jsonrpc import dumps

    for value in ({"s": "\ud800"}, ["ok", {"k": "\udc00"}]):
        with pytest.raises(UnicodeEncodeError):
            dumps(value)
        with pytest.raises(UnicodeEncodeError):
            _stdlib(value)


def test_dumps_of_a_tree_deeper_than_the_walk_is_the_stdlibs_own_answer():
    import sys

    from bridge.jsonrpc import dumps

    deep: list = []
    for _ in range(sys.getrecursionlimit() + 10):
        deep = [deep]
    try:
        expected = _stdlib(deep)
    except RecursionError:
        with pytest.raises(RecursionError):
            dumps(deep)
    else:
        assert dumps(deep) == expected
