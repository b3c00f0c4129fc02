"""The ids of hosts that share one upstream session (bridge/pipeline/era_exchanges.py), with no socket."""
from __future__ import annotations

import json

from bridge.pipeline.era_exchanges import Exchanges
from bridge.pipeline.flow import OWN_ID_PREFIX

SUB = "io.modelcontextprotocol/subscriptionId"


def frame(**msg) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **msg}).encode()


def test_alike_ids_are_made_unique_and_each_answer_goes_back_to_its_exchange():
    ids, one, two = Exchanges(), object(), object()
    first = json.loads(ids.toward(one, frame(id=1, method="tools/call")))
    second = json.loads(ids.toward(two, frame(id=1, method="tools/call")))
    assert first["id"] != second["id"] and {first["id"], second["id"]} <= set(ids.owners)
    assert ids.posted(json.dumps(second).encode()) == (two, second["id"])
    back = ids.back(frame(id=second["id"], result={}))
    assert (back.exchange, json.loads(back.data)["id"], back.answer) == (two, 1, True)
    assert ids.owed(two) == [] and ids.owed(one) == [first["id"]]


def test_a_listen_stream_s_notifications_and_its_cancel_carry_the_host_s_id():
    ids, listener = Exchanges(), object()
    own = json.loads(ids.toward(listener, frame(id="L", method="subscriptions/listen")))["id"]
    ack = ids.back(frame(method="notifications/subscriptions/acknowledged", params={"_meta": {SUB: own}}))
    assert (ack.exchange, json.loads(ack.data)["params"]["_meta"], ack.answer) == (listener, {SUB: "L"}, False)
    cancel = json.loads(ids.toward(listener, frame(method="notifications/cancelled", params={"requestId": "L"})))
    assert cancel["params"]["requestId"] == own  # its own exchange's (a flow's follow-up)
    assert ids.end(listener) == [own] and ids.owners == {}


def test_a_cancel_reaches_no_other_exchange_s_request():
    """Hosts alike choose ids alike: a cancel POSTed on its own, or naming the session's own ids,
    could be any of theirs, so it goes nowhere."""
    ids, one, two = Exchanges(), object(), object()
    own = json.loads(ids.toward(one, frame(id="listen-1", method="subscriptions/listen")))["id"]
    ids.toward(two, frame(id="listen-1", method="subscriptions/listen"))
    for named in ("listen-1", own):
        assert ids.toward(object(), frame(method="notifications/cancelled", params={"requestId": named})) is None
    assert len(ids.owners) == 2


def test_what_is_no_exchange_s_passes_as_it_is():
    ids = Exchanges()
    for data in (b"not json", frame(method="notifications/tools/list_changed"), frame(id="rb-era-1", result={}),
                 frame(method="notifications/message", params={"_meta": {SUB: None}})):
        assert ids.back(data) == (None, data, False)
    note = frame(method="notifications/initialized")
    assert ids.toward(object(), note) is note and ids.posted(note) == (None, None)


def test_a_flow_s_own_call_is_answered_to_its_flow_past_the_exchange_s_end():
    """An outbox poll the exchange's flow made (its own id): not owed by the exchange, not cancelled
    when it ends, and its answer is the flow's, not the end of the host's request."""
    ids, exchange = Exchanges(), object()
    host = json.loads(ids.toward(exchange, frame(id=7, method="tools/call")))["id"]
    poll = json.loads(ids.toward(exchange, frame(id=f"{OWN_ID_PREFIX}1", method="resources/read")))["id"]
    assert ids.owed(exchange) == [host]
    assert ids.end(exchange) == [host]
    back = ids.back(frame(id=poll, result={}))
    assert (back.exchange, json.loads(back.data)["id"], back.answer) == (exchange, f"{OWN_ID_PREFIX}1", False)
    assert ids.owners == {}
