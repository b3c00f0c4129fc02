"""Standard reminders toward a 2026-07-28 MCP host (spec §3), in playbook form: frames in, commands
out.  Each sessionless request is a flow of its own, as `serve` makes them; flows of one identity
share the route's `Subscriptions` book, flows of another identity do not reach it."""
from __future__ import annotations

import io
import json

import pytest

from bridge.pipeline.commands import HOST, PEER, Forward, Send
from bridge.pipeline.flow import OWN_ID_PREFIX
from bridge.pipeline.subscriptions import Subscriptions
from bridge.rules import parse_rules_text
from bridge.state.scope import Scope
from bridge.telemetry import Recorder
from tests.flows import make_flow

MODERN = "2026-07-28"
CAPS = "io.modelcontextprotocol/clientCapabilities"
SUB = "io.modelcontextprotocol/subscriptionId"
IDENTITY = Scope.identity("r", "header:authorization", "Bearer alice")


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def envelope(caps: dict) -> dict:
    return {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: caps}


def request(msg_id, method: str, caps: dict, **params) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {**params, "_meta": envelope(caps)}})


def listen(msg_id, caps: dict, **notifications) -> bytes:
    return request(msg_id, "subscriptions/listen", caps, notifications=notifications)


def ack(msg_id, **notifications) -> bytes:
    return frame({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                  "params": {"notifications": notifications, "_meta": {SUB: msg_id}}})


def harn_reminder(n: int, sub_id=None) -> bytes:
    meta = {"harn": {"reminder": {"id": f"r{n}", "body": f"reminder {n}"}}}
    if sub_id is not None:
        meta[SUB] = sub_id
    return frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": f"reminder {n}", "_meta": meta}})


def request_flow(book: Subscriptions | None, scope: Scope = IDENTITY, rules: str = ""):
    """One sessionless request's flow, as `serve` makes it for a 2026-07-28 request."""
    settings = parse_rules_text(rules).defaults
    return make_flow("mcp", settings, Recorder(route="r", log=io.StringIO()), scope=scope, subscriptions=book)


def sent(commands) -> list[dict]:
    return [json.loads(c.data) for c in commands if type(c) is Send]


STANDARD = {"extensions": {"com.example/reminders": {}}}


# -- the host declares support per request ---------------------------------------------------------

@pytest.mark.parametrize("caps", [{"reminders": {}}, {"experimental": {"reminders": {}}}, STANDARD])
def test_each_way_of_declaring_makes_a_request_standard(caps):
    f = request_flow(None)
    f.from_host(request(1, "tools/call", caps, name="t"))
    assert f.host.dialect == "standard"
    [send] = f.from_peer(harn_reminder(1))
    assert json.loads(send.data)["method"] == "notifications/reminder" and send.stream is None


def test_a_request_that_declares_nothing_is_none_though_an_earlier_one_declared():
    book = Subscriptions()
    first, second = request_flow(book), request_flow(book)
    first.from_host(request(1, "tools/list", STANDARD))
    second.from_host(request(2, "tools/list", {}))
    assert (first.host.dialect, second.host.dialect) == ("standard", "none")


# -- a reminder that belongs to a request rides that request's stream -----------------------------

def test_a_request_reminder_goes_on_that_requests_own_stream():
    book = Subscriptions()
    f = request_flow(book)
    f.from_host(request(7, "tools/call", STANDARD, name="touch_file"))
    [send] = f.from_peer(harn_reminder(1))
    assert send.to == HOST and send.stream is None  # the exchange at hand: the request's SSE answer
    out = json.loads(send.data)
    assert out["params"]["reminder"]["id"] == "r1" and SUB not in out["params"].get("_meta", {})


# -- an ambient reminder rides an open listen stream that opted in --------------------------------

def test_a_listen_that_opts_in_is_acknowledged_so_and_takes_ambient_reminders_stamped():
    f = request_flow(Subscriptions())
    opened = listen(3, STANDARD, toolsListChanged=True, reminders=True)
    assert f.from_host(opened) == [Forward(PEER, opened)]  # the listen itself goes upstream untouched
    key = f.subscription()  # the proxy's own key for the stream, never the host's id
    assert isinstance(key, str) and key.startswith(OWN_ID_PREFIX)
    [acked] = sent(f.from_peer(ack(3, toolsListChanged=True)))  # the server knows nothing of reminders
    assert acked["params"]["notifications"] == {"toolsListChanged": True, "reminders": True}
    assert acked["params"]["_meta"] == {SUB: 3}
    [send] = f.from_peer(harn_reminder(1, sub_id=3))
    out = json.loads(send.data)
    assert out["method"] == "notifications/reminder" and out["params"]["_meta"][SUB] == 3
    assert send.stream is None  # its own stream


def test_an_acknowledgement_that_already_echoes_reminders_passes_untouched():
    f = request_flow(Subscriptions())
    f.from_host(listen(3, STANDARD, reminders=True))
    echoed = ack(3, reminders=True)
    assert f.from_peer(echoed) == [Forward(HOST, echoed)]


def test_an_ambient_reminder_on_a_stream_that_did_not_opt_in_goes_to_the_one_that_did():
    book = Subscriptions()
    opted, other = request_flow(book), request_flow(book)
    opted.from_host(listen("a", STANDARD, reminders=True))
    opted.from_peer(ack("a"))
    other.from_host(listen("b", STANDARD, toolsListChanged=True))
    acked = ack("b", toolsListChanged=True)
    assert other.from_peer(acked) == [Forward(HOST, acked)]  # no opt-in: nothing added
    [send] = other.from_peer(harn_reminder(1, sub_id="b"))
    assert send.stream == opted.subscription()  # named for the transport: the opted-in listen's stream
    assert json.loads(send.data)["params"]["_meta"][SUB] == "a"


def test_an_ambient_reminder_never_reaches_another_identitys_listen_stream():
    book = Subscriptions()
    alice = request_flow(book)
    alice.from_host(listen("a", STANDARD, reminders=True))
    alice.from_peer(ack("a"))
    bob = request_flow(book, scope=Scope.identity("r", "header:authorization", "Bearer bob"))
    bob.from_host(listen("b", STANDARD))
    bob.from_peer(ack("b"))
    assert bob.from_peer(harn_reminder(1, sub_id="b")) == []  # held for bob's fallback
    assert bob.recorder.count("queued") == 1 and bob.recorder.count("rewritten") == 0


def test_a_listen_that_ended_takes_no_more_reminders():
    book = Subscriptions()
    opted = request_flow(book)
    opted.from_host(listen("a", STANDARD, reminders=True))
    opted.from_peer(ack("a"))
    opted.close("the stream ended")
    other = request_flow(book)
    other.from_host(listen("b", STANDARD))
    assert other.from_peer(harn_reminder(1)) == []  # queued: no stream takes it


def test_listens_of_one_scope_with_the_same_id_keep_streams_of_their_own():
    """Hosts alike choose listen ids alike (the SDK's `listen-1`): each stream has the proxy's own
    key, so one host's stream ending leaves the other's taking reminders, and each is named apart."""
    book = Subscriptions()
    first, second = request_flow(book), request_flow(book)
    for f in (first, second):
        f.from_host(listen("listen-1", STANDARD, reminders=True))
        f.from_peer(ack("listen-1"))
    assert first.subscription() != second.subscription()
    other = request_flow(book)
    other.from_host(request(9, "tools/call", STANDARD, name="t"))
    [send] = other.from_peer(harn_reminder(1, sub_id="elsewhere"))
    assert send.stream == second.subscription()  # the newest
    second.close("the stream ended")
    [send] = other.from_peer(harn_reminder(2, sub_id="elsewhere"))
    assert send.stream == first.subscription()  # still open: the other host's end was not its own
    assert json.loads(send.data)["params"]["_meta"][SUB] == "listen-1"


def test_a_standard_reminder_on_a_stream_that_did_not_opt_in_leaves_it_despite_an_equal_id():
    """The server's own standard reminder, stamped `L` on a stream that did not opt in: another host's
    stream of the same id did, so it goes there (by the proxy's key), not on the stream it came on."""
    book = Subscriptions()
    opted, other = request_flow(book), request_flow(book)
    opted.from_host(listen("L", STANDARD, reminders=True))
    opted.from_peer(ack("L"))
    other.from_host(listen("L", STANDARD, toolsListChanged=True))
    other.from_peer(ack("L", toolsListChanged=True))
    standard = frame({"jsonrpc": "2.0", "method": "notifications/reminder",
                      "params": {"reminder": {"id": "s1", "body": "b"}, "_meta": {SUB: "L"}}})
    [send] = other.from_peer(standard)
    assert send.stream == opted.subscription()


def test_a_listen_of_a_host_without_support_is_not_told_it_gets_reminders():
    f = request_flow(Subscriptions())
    f.from_host(listen(3, {}, reminders=True))
    acked = ack(3)
    assert f.from_peer(acked) == [Forward(HOST, acked)]


def test_the_legacy_form_never_rides_a_listen_stream():
    f = request_flow(Subscriptions())
    f.from_host(listen(3, {"_meta": {"harn": {"reminders": {}}}}, reminders=True))
    acked = ack(3)
    assert f.from_peer(acked) == [Forward(HOST, acked)]  # not told it gets reminders there
    assert f.from_peer(harn_reminder(1, sub_id=3)) == []  # held for the fallback, not a log message
    assert f.recorder.count("queued") == 1


# -- otherwise: held for the host's fallback ------------------------------------------------------

def test_an_ambient_reminder_with_no_stream_open_waits_for_the_identitys_next_tool_result():
    book = Subscriptions()
    listener = request_flow(book)
    listener.from_host(listen("b", {}))
    assert listener.from_peer(harn_reminder(1, sub_id="b")) == []
    listener.close("the stream ended")  # the held reminder is the identity's, not the stream's
    assert listener.recorder.count("dropped") == 0
    later = request_flow(book)
    later.from_host(request(9, "tools/call", {}, name="echo"))
    result = frame({"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "ok"}],
                                                          "resultType": "complete"}})
    [send] = later.from_peer(result)
    content = json.loads(send.data)["result"]["content"]
    assert content[0] == {"type": "text", "text": "ok"} and "reminder 1" in content[1]["text"]
    again = request_flow(book)  # delivered once: the next result carries nothing
    again.from_host(request(10, "tools/call", {}, name="echo"))
    assert again.from_peer(result) == [Forward(HOST, result)]


def test_a_request_of_its_own_scope_shares_nothing_its_held_reminders_end_with_it():
    book = Subscriptions()
    f = request_flow(book, scope=Scope.request("r"))
    f.from_host(listen("b", {}))
    assert f.from_peer(harn_reminder(1)) == []
    f.close("the request ended")
    assert f.recorder.count("dropped") == 1


def test_a_book_full_of_scopes_lets_the_oldest_go_and_says_so():
    book = Subscriptions(max_scopes=1)
    first = request_flow(book)
    first.from_host(listen("b", {}))
    first.from_peer(harn_reminder(1))
    other = request_flow(book, scope=Scope.identity("r", "header:authorization", "Bearer bob"))
    assert other.recorder.count("dropped") == 1


# -- the server's capability, under the key the host used -----------------------------------------

DISCOVERED = {"jsonrpc": "2.0", "id": 1, "result": {
    "resultType": "complete", "supportedVersions": [MODERN], "ttlMs": 0, "cacheScope": "private",
    "capabilities": {"tools": {}, "_meta": {"harn": {"reminders": {"emit": True}}}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}}}


@pytest.mark.parametrize("caps, where", [
    ({"reminders": {}}, ("reminders",)),
    ({"experimental": {"reminders": {}}}, ("experimental", "reminders")),
    (STANDARD, ("extensions", "com.example/reminders")),
])
def test_discover_tells_the_server_capability_under_the_key_the_host_used(caps, where):
    f = request_flow(None)
    f.from_host(request(1, "server/discover", caps))
    [send] = f.from_peer(frame(DISCOVERED))
    told = json.loads(send.data)["result"]["capabilities"]
    found = told
    for part in where:
        found = found[part]
    assert found == {"emit": True}
    assert (where == ("reminders",)) == ("reminders" in told)
    assert "reminders" not in told.get("_meta", {}).get("harn", {})


def test_discover_moves_a_standard_servers_own_capability_to_the_hosts_key():
    f = request_flow(None)
    f.from_host(request(1, "server/discover", {"experimental": {"reminders": {}}}))
    standard = {**DISCOVERED, "result": {**DISCOVERED["result"], "capabilities": {
        "reminders": {"emit": True}, "experimental": {"other": {}}}}}
    [send] = f.from_peer(frame(standard))
    assert json.loads(send.data)["result"]["capabilities"] == {"experimental": {"other": {}, "reminders": {"emit": True}}}


def test_held_reminders_ride_the_result_of_a_host_that_declares_support_too_never_after_it():
    """What follows a 2026-07-28 result belongs to no request (over HTTP the stream has ended): the
    reminders held for lack of a listen stream ride the result itself."""
    book = Subscriptions()
    listener = request_flow(book)
    listener.from_host(listen("b", STANDARD))
    listener.from_peer(ack("b"))
    assert listener.from_peer(harn_reminder(1, sub_id="b")) == []
    later = request_flow(book)
    later.from_host(request(9, "tools/call", STANDARD, name="echo"))
    result = frame({"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "ok"}]}})
    [send] = later.from_peer(result)
    assert send.answers is not None and "reminder 1" in json.loads(send.data)["result"]["content"][1]["text"]


def test_on_one_connection_a_stamped_reminder_goes_to_the_listen_that_opted_in_named_by_its_id():
    """stdio: every listen shares the pipe, demultiplexed by `subscriptionId`; no stream is named."""
    f = request_flow(None, scope=Scope.connection("r"))
    f.from_host(listen("quiet", STANDARD, toolsListChanged=True))
    f.from_host(listen("loud", STANDARD, reminders=True))
    f.from_peer(ack("quiet", toolsListChanged=True))
    [acked] = sent(f.from_peer(ack("loud")))
    assert acked["params"]["notifications"] == {"reminders": True}
    [send] = f.from_peer(harn_reminder(1, sub_id="quiet"))
    assert send.stream is None and json.loads(send.data)["params"]["_meta"][SUB] == "loud"
    assert f.subscription() is None  # nothing for a transport to keep: it is the connection


def cancelled(msg_id) -> bytes:
    return frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": msg_id}})


def test_listens_the_host_cancels_or_the_server_ends_leave_nothing_behind():
    """One connection (stdio) opening and closing many listen streams: the flow keeps only those
    still open, the book none of the closed ones, and a reminder after them takes the fallback."""
    book = Subscriptions()
    f = request_flow(book, scope=Scope.connection("r"))
    for n in range(1000):
        f.from_host(listen(n, STANDARD, reminders=True))
        f.from_peer(ack(n))
        if n % 2:
            ended = frame({"jsonrpc": "2.0", "id": n, "result": {}})  # the server ended this one
            assert f.from_peer(ended) == [Forward(HOST, ended)]
        else:
            gone = cancelled(n)
            assert f.from_host(gone) == [Forward(PEER, gone)]  # the host's cancel goes on untouched
    assert f.state.listens == {} and f.state.honoured == [] and len(f.awaiting) == 0
    assert book.stream(f.scope) is None
    assert b"notifications/cancelled" not in f.host_markers  # nothing to look at in a cancel any more
    assert f.from_peer(harn_reminder(1, sub_id=998)) == []  # a closed stream's: held for the next tool result
    assert f.recorder.count("queued") == 1


def test_a_cancel_of_another_request_leaves_the_listen_open():
    f = request_flow(Subscriptions(), scope=Scope.connection("r"))
    f.from_host(listen("L", STANDARD, reminders=True))
    f.from_peer(ack("L"))
    f.from_host(cancelled("other"))
    [send] = f.from_peer(harn_reminder(1, sub_id="L"))
    assert json.loads(send.data)["params"]["_meta"][SUB] == "L"


def test_a_listen_is_forwarded_as_lasting_and_nothing_else_is():
    """The flow says which request's answer is a long-lived stream (a transport reads no frame to
    learn it, and bounds every other answer by its upstream timeout)."""
    f = request_flow(None, scope=Scope.connection("r"))
    opened = listen("L", STANDARD, toolsListChanged=True)
    [forward] = f.from_host(opened)
    assert forward == Forward(PEER, opened) and forward.data is opened and forward.lasting
    call = request(2, "tools/call", STANDARD, name="echo")
    assert [c.lasting for c in f.from_host(call)] == [False]
