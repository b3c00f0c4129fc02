"""The host's requests a flow saw no answer to (`bridge/pipeline/inflight.py`), in playbook form:
frames in, the error replies out once the transport says the upstream is gone. Ids are read off the
bytes and go back exactly as the host wrote them; cancelled, answered and own requests get nothing."""
from __future__ import annotations

import io
import json

import pytest

from bridge.assembly import make_flow
from bridge.jsonrpc import id_key
from bridge.pipeline.commands import HOST, PEER, Forward, Reply
from bridge.pipeline.flow import OWN_ID_PREFIX
from bridge.pipeline.inflight import Unanswered, detect_protocol, oversize_reply, token_key
from bridge.telemetry import Recorder

GONE = {"code": -32000, "message": "Connection closed: server exited with code 3 before answering (reminder-bridge)",
        "data": {"command": "server", "exitCode": 3}}


def request(msg_id, method="tools/call") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {}}).encode()


def response(msg_id) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {}}).encode()


def cancel(msg_id) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": msg_id, "reason": "user"}}).encode()


def mcp():
    return make_flow("mcp", None, Recorder(log=io.StringIO()))


def play(flow, *steps: tuple[str, bytes]) -> list:
    """Feed each (side, frame) to the flow; what it gave, step by step."""
    return [flow.from_host(frame) if side == HOST else flow.from_peer(frame) for side, frame in steps]


def test_every_request_left_unanswered_gets_the_error_in_the_order_sent_with_its_id_as_written():
    flow = mcp()
    play(flow, (HOST, request(1)), (HOST, b'{"jsonrpc":"2.0","id":"slow-1","method":"hang"}'), (HOST, request(2)),
         (HOST, b'{"jsonrpc":"2.0","id":3.50,"method":"hang"}'), (PEER, response(1)), (PEER, response(2)))
    replies = flow.upstream_gone(GONE)
    assert [type(r) for r in replies] == [Reply, Reply] and {r.to for r in replies} == {HOST}
    assert [r.request_id for r in replies] == ["slow-1", 3.5]
    assert replies[1].data == b'{"jsonrpc":"2.0","id":3.50,"error":' + json.dumps(GONE, separators=(",", ":")).encode() + b"}"
    assert flow.upstream_gone(GONE) == []  # answered once


def test_a_cancelled_request_an_own_call_and_notifications_get_nothing():
    flow = mcp()
    play(flow, (HOST, request("c")), (HOST, cancel("c")), (HOST, b'{"jsonrpc":"2.0","method":"notifications/initialized"}'),
         (HOST, request(f"{OWN_ID_PREFIX}7")), (HOST, b'{"method":"ping","params":{"id":99},"jsonrpc":"2.0","id":"ts"}'))
    assert [r.request_id for r in flow.upstream_gone(GONE)] == ["ts"]  # the TypeScript SDK's order: id last


def test_a_request_the_proxy_answered_itself_is_not_answered_again():
    flow = make_flow("acp", None, Recorder(log=io.StringIO()), peer_dialect="none")
    [reply] = flow.from_host(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "session/inject_reminder",
                                         "params": {"sessionId": "s", "reminder": {"id": "r", "body": "b"}}}).encode())
    assert isinstance(reply, Reply) and reply.to == HOST and reply.answers == id_key(4)
    assert flow.upstream_gone(GONE) == []


def test_an_untouched_response_says_which_request_it_answers():
    flow = mcp()
    play(flow, (HOST, request("a")))
    [out] = flow.from_peer(response("a"))
    assert out == Forward(HOST, response("a")) and out.answers == id_key("a")
    [later] = flow.from_peer(response("a"))  # nothing waits for it any more
    assert later.answers is None


def test_a_block_of_lines_that_passes_is_tracked_as_its_frames_would_be():
    flow = mcp()
    block = request(1) + b"\n" + request(2) + b"\n" + cancel(2) + b"\n"
    assert flow.passes_on(block, HOST)
    assert flow.passes_on(response(1) + b"\n", PEER)
    assert flow.upstream_gone(GONE) == []


def test_an_upstream_that_fails_one_http_request_answers_only_the_requests_of_that_body():
    flow = mcp()
    play(flow, (HOST, request(1)), (HOST, request(2)))
    [reply] = flow.upstream_gone(GONE, request(2))
    assert reply.request_id == 2
    assert flow.upstream_gone(GONE, request(2)) == []  # its answer went
    assert [r.request_id for r in flow.upstream_gone(GONE)] == [1]


def test_an_oversize_request_is_answered_and_an_oversize_response_ends_the_hosts_wait():
    flow = mcp()
    play(flow, (HOST, request(9)))
    [error] = flow.oversize(b'{"jsonrpc":"2.0","id":9,"result":{"content":"xxxx', PEER, 100)
    assert error.to == HOST and json.loads(error.data)["error"]["code"] == -32600
    assert flow.upstream_gone(GONE) == []  # the error was its answer
    [refused] = flow.oversize(b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"a":"', HOST, 100)
    assert json.loads(refused.data)["error"]["data"] == {"limit": 100}
    assert flow.oversize(b'{"jsonrpc":"2.0","method":"notifications/progress"', PEER, 100) == []


def test_the_table_forgets_its_oldest_half_past_its_limit():
    table = Unanswered()
    table.asked(b"\n".join(request(i) for i in range(Unanswered.LIMIT + 1)))
    assert len(table.ids) == Unanswered.LIMIT // 2 + 1 and b"0" not in table.ids


@pytest.mark.parametrize("token, msg_id", [(b"7", 7), (b'"a"', "a"), (b"-1", -1), (b"3.50", 3.5),
                                           (b'"\\u00e9"', "\u00e9"), (b'"\\ud800"', "\ud800")])
def test_a_token_has_the_key_of_its_id(token, msg_id):
    assert token_key(token) == id_key(msg_id)


def test_oversize_reply_reads_the_id_of_a_head_and_nothing_else():
    assert oversize_reply(b'{"id":"x","method":"m"', 10, from_host=False) is None  # a request from the peer
    msg_id, data = oversize_reply(b'{"id":"x","method":"m"', 10, from_host=True)
    assert msg_id == "x" and json.loads(data)["id"] == "x"


@pytest.mark.parametrize("first, protocol", [
    (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}', "acp"),
    (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientCapabilities":{}}}', "acp"),
    (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}', "mcp"),
    (b"not json", "mcp"),
])
def test_the_protocol_is_read_from_the_hosts_first_frame(first, protocol):
    assert detect_protocol(first) == protocol


def test_an_exchange_that_ended_leaves_nothing_of_its_requests_behind():
    """HTTP: a request whose answer went by another way (a raw relay, a 202) takes no room for ever."""
    flow = mcp()
    play(flow, (HOST, request(1)), (HOST, request(2)))
    flow.exchange_ended(request(1))
    assert [r.request_id for r in flow.upstream_gone(GONE)] == [2]


def test_awaits_says_whether_a_request_of_a_frame_is_still_unanswered():
    """What an HTTP transport asks when an answer stream ended: resume it, or give up on it."""
    flow = make_flow("mcp", recorder=Recorder())
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}'
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    flow.from_host(call)
    assert flow.awaits(call) and not flow.awaits(note)
    flow.from_peer(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}}')
    assert flow.awaits(call)
    flow.from_peer(b'{"jsonrpc":"2.0","id":7,"result":{}}')
    assert not flow.awaits(call)
