"""Many sessions over one shared stdio child: ids rewritten per session, answers back to the
session that asked with its id as written, the server's own requests and notifications routed."""
from __future__ import annotations

import json

from bridge.transports.multiplex import SharedIds, with_id


def answer_to(sent: bytes, result: object = "ok") -> bytes:
    """What a server answers to ``sent`` (it echoes the id it got)."""
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(sent)["id"], "result": result}).encode()


def test_two_sessions_with_the_same_ids_get_only_their_own_answers():
    ids = SharedIds(prefix="rbxtests")
    a, b = ids.join(), ids.join()
    to_a = ids.outbound(a, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}')
    to_b = ids.outbound(b, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}')
    assert json.loads(to_a)["id"] == "rbxtests1:1" and json.loads(to_b)["id"] == "rbxtests2:1"
    assert ids.inbound(answer_to(to_b, "for b")) == [(b, b'{"jsonrpc":"2.0","id":1,"result":"for b"}')]
    assert ids.inbound(answer_to(to_a, "for a")) == [(a, b'{"jsonrpc":"2.0","id":1,"result":"for a"}')]


def test_an_id_goes_back_exactly_as_the_host_wrote_it():
    ids = SharedIds(prefix="p")
    tag = ids.join()
    for token in (b"7.0", b'"a\\"b"', b'"\\u00e9"', b"-3", b"1e2"):
        sent = ids.outbound(tag, b'{"jsonrpc": "2.0", "method": "ping", "id": ' + token + b"}")
        [(got_tag, back)] = ids.inbound(answer_to(sent, {}))
        assert got_tag == tag and back == b'{"jsonrpc":"2.0","id":' + token + b',"result":{}}'


def test_an_answer_for_no_session_or_a_session_gone_reaches_nobody():
    ids = SharedIds(prefix="p")
    tag = ids.join()
    sent = ids.outbound(tag, b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert ids.inbound(b'{"jsonrpc":"2.0","id":1,"result":{}}') == []  # the host's own id: never asked so
    assert ids.inbound(b'{"jsonrpc":"2.0","id":"p9:1","result":{}}') == []  # a session that never was
    ids.leave(tag)
    assert ids.inbound(answer_to(sent)) == []


def test_a_host_cannot_pass_for_another_session_by_its_ids():
    ids = SharedIds(prefix="p")
    a, b = ids.join(), ids.join()
    forged = ids.outbound(b, b'{"jsonrpc":"2.0","id":"p1:1","method":"ping"}')  # b writes a's wrapped id
    assert ids.inbound(answer_to(forged)) == [(b, b'{"jsonrpc":"2.0","id":"p1:1","result":"ok"}')]
    cancel = ids.outbound(b, b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}')
    assert json.loads(cancel)["params"]["requestId"] == "p2:1"  # b cancels its own request 1, never a's
    assert a in ids.inflight


def test_the_servers_request_goes_to_the_session_that_last_asked_and_only_it_may_answer():
    ids = SharedIds(prefix="p")
    a, b = ids.join(), ids.join()
    ids.outbound(b, b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
    ask = b'{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{}}'
    assert ids.inbound(ask) == [(b, ask)]
    assert ids.outbound(a, b'{"jsonrpc":"2.0","id":5,"result":{"forged":true}}') is None
    assert ids.outbound(b, b'{"jsonrpc":"2.0","id":5,"result":{}}') == b'{"jsonrpc":"2.0","id":5,"result":{}}'
    assert ids.outbound(b, b'{"jsonrpc":"2.0","id":5,"result":{}}') is None  # answered once


def test_notifications_go_to_the_sessions_waiting_for_an_answer_else_to_all():
    ids = SharedIds(prefix="p")
    a, b = ids.join(), ids.join()
    note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x","_meta":{"id":1}}}'
    assert ids.inbound(note) == [(a, note), (b, note)]
    sent = ids.outbound(a, b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
    assert ids.inbound(note) == [(a, note)]
    ids.inbound(answer_to(sent))
    assert ids.inbound(note) == [(a, note), (b, note)]
    assert ids.outbound(a, note) is note  # toward the child: as it came


def test_a_batch_is_split_by_session():
    ids = SharedIds(prefix="p")
    a, b = ids.join(), ids.join()
    batch_a = json.loads(ids.outbound(a, b'[{"jsonrpc":"2.0","id":1,"method":"x"},{"jsonrpc":"2.0","method":"y"}]'))
    to_b = ids.outbound(b, b'{"jsonrpc":"2.0","id":1,"method":"x"}')
    answers = json.dumps([{"jsonrpc": "2.0", "id": batch_a[0]["id"], "result": 1},
                          {"jsonrpc": "2.0", "id": json.loads(to_b)["id"], "result": 2}]).encode()
    assert ids.inbound(answers) == [(a, b'[{"jsonrpc":"2.0","id":1,"result":1}]'),
                                    (b, b'[{"jsonrpc":"2.0","id":1,"result":2}]')]


def test_the_head_of_a_line_too_long_names_its_session():
    ids = SharedIds(prefix="p")
    tag = ids.join()
    sent = ids.outbound(tag, b'{"jsonrpc":"2.0","id":"q\\"1","method":"x"}')
    head = answer_to(sent, "x" * 100)[:60]
    assert ids.unwrap_head(head) == (tag, b'{"jsonrpc": "2.0", "id":"q\\"1", "result": "xxxxxxx')
    assert ids.unwrap_head(b'{"jsonrpc":"2.0","id":1,') is None


def test_with_id_puts_jsonrpc_and_the_id_first():
    assert with_id({"result": {}, "jsonrpc": "2.0", "id": 1}, b"7") == b'{"jsonrpc":"2.0","id":7,"result":{}}'
    assert with_id({"id": 1}, b'"x"') == b'{"id":"x"}'


def test_a_notification_stamped_with_a_listen_request_goes_to_that_session_with_its_id():
    ids = SharedIds(prefix="p")
    a, b = ids.join(), ids.join()
    listen = ids.outbound(b, b'{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{}}')
    ids.outbound(a, b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}')  # a waits for an answer meanwhile
    stamped = {"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"data": "x", "_meta": {"io.modelcontextprotocol/subscriptionId": json.loads(listen)["id"]}}}
    [(tag, data)] = ids.inbound(json.dumps(stamped).encode())
    assert tag == b and json.loads(data)["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
