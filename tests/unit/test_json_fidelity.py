"""spec §8 through the JSON decoder the proxy uses (msgspec when `[fast]` is installed, else the
stdlib): values a rewrite carries on come out as they went in: integers beyond 64 bits, key
order, lone surrogates, NaN, number spellings the stdlib would keep."""
from __future__ import annotations

import json
import math

import pytest

from bridge.jsonrpc import loads
from bridge.assembly import make_flow

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
