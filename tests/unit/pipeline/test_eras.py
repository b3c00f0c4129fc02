"""The era bridge's core (bridge/pipeline/eras.py), with no socket: frames in, `Write`s out."""
from __future__ import annotations

import json

import pytest

from bridge.pipeline.commands import HOST, PEER, Forward, Send, Write
from bridge.pipeline.eras import BRIDGES, SUBSCRIBED_URIS, LegacyServer, ModernServer
from tests.paths import SCHEMAS
from tests.unit.dialects.test_schemas import assert_valid, validator_for

MODERN, LEGACY = "2026-07-28", "2025-11-25"
CAPS = {"extensions": {"com.example/reminders": {}}}
INFO = {"name": "host", "version": "1"}
SCHEMA = json.loads((SCHEMAS / "mcp-2026-07-28.schema.json").read_text())


def envelope(caps=CAPS, info=INFO, **more) -> dict:
    return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": info, **more}


def frame(msg: dict) -> bytes:
    return json.dumps(msg).encode()


def request(msg_id, method: str, meta: dict | None = None, **params) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "method": method,
                  "params": {**params, "_meta": meta if meta is not None else envelope()}})


def sent(writes, to: str) -> list[dict]:
    """What ``writes`` put on the wire toward ``to`` (not the timers the bridge asks for)."""
    return [json.loads(w.data) for w in writes if isinstance(w, Write) and w.to == to]


def opened(bridge: LegacyServer, first: bytes, result: dict | None = None) -> list:
    """Feed the host's first request and the server's `initialize` answer; what the latter gave."""
    [init] = sent(bridge.toward_server(first), PEER)
    assert init["method"] == "initialize"
    answer = {"jsonrpc": "2.0", "id": init["id"], "result": result or {
        "protocolVersion": LEGACY, "capabilities": {"tools": {}, "_meta": {"harn": {"reminders": {"emit": True}}}},
        "serverInfo": {"name": "old", "version": "2"}, "instructions": "be kind"}}
    return bridge.from_server(frame(answer))


@pytest.fixture
def bridge() -> LegacyServer:
    return LegacyServer(MODERN, lambda: MODERN)


def test_discover_opens_the_session_and_is_answered_from_initialize(bridge):
    [init] = sent(bridge.toward_server(request(1, "server/discover")), PEER)
    assert init["params"] == {"protocolVersion": LEGACY, "capabilities": CAPS, "clientInfo": INFO}
    answer = {"jsonrpc": "2.0", "id": init["id"], "result": {
        "protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": {"name": "old", "version": "2"},
        "instructions": "be kind"}}
    writes = bridge.from_server(frame(answer))
    assert [(w.to, json.loads(w.data).get("method")) for w in writes] == [(PEER, "notifications/initialized"),
                                                                         (HOST, None)]
    [discovered] = sent(writes, HOST)
    result = discovered["result"]
    assert discovered["id"] == 1
    assert result == {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {}},
                      "ttlMs": 0, "cacheScope": "private", "instructions": "be kind",
                      "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "old", "version": "2"}}}
    assert_valid(validator_for(SCHEMA, "DiscoverResult"), result)
    # a second discover is answered at once, from the session kept
    assert sent(bridge.toward_server(request(2, "server/discover")), HOST)[0]["result"] == result


def test_what_comes_before_the_answer_waits_and_goes_in_order(bridge):
    first = bridge.toward_server(request(1, "tools/list"))
    assert bridge.toward_server(request(2, "tools/call", name="echo")) == []  # initialize asked once
    [init] = sent(first, PEER)
    writes = bridge.from_server(frame({"jsonrpc": "2.0", "id": init["id"], "result": {"capabilities": {}}}))
    assert [json.loads(w.data).get("method") for w in writes] == ["notifications/initialized", "tools/list",
                                                                  "tools/call"]


def test_requests_lose_only_the_2026_07_28_meta_keys(bridge):
    opened(bridge, request(0, "tools/list"))
    progress = request(5, "tools/call", envelope(progressToken=7), name="echo")
    [out] = sent(bridge.toward_server(progress), PEER)
    assert out["params"] == {"name": "echo", "_meta": {"progressToken": 7}}
    [bare] = sent(bridge.toward_server(request(6, "tools/list")), PEER)
    assert "_meta" not in bare["params"]
    plain = frame({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert bridge.toward_server(plain) == [Forward(PEER, plain)]  # nothing to strip: the bytes as they came


def test_results_get_result_type_and_cache_fields(bridge):
    opened(bridge, request(0, "tools/list"))
    bridge.toward_server(request(1, "tools/list"))
    bridge.toward_server(request(2, "tools/call", name="echo"))
    bridge.toward_server(request(3, "resources/read", uri="file:///a"))
    listed = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})), HOST)[0]
    called = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 2, "result": {"content": []}})), HOST)[0]
    read = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 3, "result": {"contents": [], "ttlMs": 5}})),
                HOST)[0]
    assert listed["result"] == {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": []}
    assert called["result"] == {"resultType": "complete", "content": []}
    assert read["result"]["ttlMs"] == 5  # the server's own word stands
    for name, result in (("ListToolsResult", listed), ("CallToolResult", called), ("ReadResourceResult", read)):
        assert_valid(validator_for(SCHEMA, name), result["result"])
    error = frame({"jsonrpc": "2.0", "id": 9, "error": {"code": -1, "message": "no"}})
    assert bridge.from_server(error) == [Forward(HOST, error)]


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"])
def test_what_2026_07_28_removed_is_answered_without_the_server(bridge, method):
    """As a 2026-07-28 server answers it (the conformance suite's `server-stateless`): method not found."""
    opened(bridge, request(0, "tools/list"))
    writes = bridge.toward_server(request(4, method))
    assert sent(writes, PEER) == []
    [error] = sent(writes, HOST)
    assert error["id"] == 4 and error["error"]["code"] == -32601 and method in error["error"]["message"]
    assert error["error"]["data"] == {"method": method, "hostEra": MODERN, "serverEra": LEGACY}


def test_what_cannot_be_bridged_is_an_error_naming_it_and_both_eras(bridge):
    opened(bridge, request(0, "tools/list"))
    [other] = sent(bridge.toward_server(request(4, "tools/list", envelope(caps={}))), HOST)
    assert other["error"]["code"] == -32601 and "second client capability set" in other["error"]["message"]
    assert other["error"]["data"] == {"feature": "a second client capability set or client info", "hostEra": MODERN,
                                      "serverEra": LEGACY}
    [refused] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage",
                                               "params": {}})), PEER)
    assert refused["id"] == "s1" and "sampling/createMessage" in refused["error"]["message"]
    pong = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": "s2", "method": "ping"})), PEER)
    assert pong == [{"jsonrpc": "2.0", "id": "s2", "result": {}}]


def test_log_messages_need_an_opt_in_and_reminders_always_pass(bridge):
    opened(bridge, request(0, "tools/list"))
    log = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    reminder = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "data": "b", "_meta": {"harn": {"reminder": {"body": "b"}}}}})
    assert bridge.from_server(log) == []
    assert bridge.from_server(reminder) == [Forward(HOST, reminder)]
    writes = bridge.toward_server(request(8, "tools/call", envelope(**{"io.modelcontextprotocol/logLevel": "info"})))
    assert [m["method"] for m in sent(writes, PEER)] == ["logging/setLevel", "tools/call"]
    assert sent(writes, PEER)[0]["params"] == {"level": "info"}
    assert bridge.from_server(log) == [Forward(HOST, log)]
    again = bridge.toward_server(request(9, "tools/call", envelope(**{"io.modelcontextprotocol/logLevel": "info"})))
    assert [m["method"] for m in sent(again, PEER)] == ["tools/call"]  # the level is set already
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 8, "result": {"content": []}}))
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 9, "result": {"content": []}}))
    assert bridge.from_server(log) == []  # no request that asked is open any more
    changed = frame({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert bridge.from_server(changed) == []


def test_a_refused_initialize_answers_what_waited(bridge):
    [init] = sent(bridge.toward_server(request(1, "tools/list")), PEER)
    refused = bridge.from_server(frame({"jsonrpc": "2.0", "id": init["id"],
                                        "error": {"code": -32602, "message": "bad version"}}))
    [answer] = sent(refused, HOST)
    assert answer["id"] == 1 and answer["error"]["code"] == -32602
    assert "2025-11-25 server refused initialize: bad version" in answer["error"]["message"]


def test_initialize_from_a_host_the_route_calls_2026_07_28(bridge):
    init = frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    [error] = sent(bridge.toward_server(init), HOST)
    assert error["error"]["code"] == -32601 and "host_era" in error["error"]["message"]
    opened(bridge, request(0, "tools/list"))
    [again] = sent(bridge.toward_server(init), HOST)  # nor once the session is open: never the server's
    assert again["error"]["code"] == -32601


def test_an_auto_route_lets_a_2025_11_25_host_through_untouched():
    bridge = LegacyServer("auto", lambda: LEGACY)
    init = frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    log = frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}})
    assert bridge.toward_server(init) == [Forward(PEER, init)]
    assert bridge.from_server(log) == [Forward(HOST, log)]
    assert bridge.toward_server(request(2, "ping")) == [Forward(PEER, request(2, "ping"))]


def test_bad_frames_go_on_for_the_other_side_to_judge(bridge):
    assert bridge.toward_server(b"{nope") == [Forward(PEER, b"{nope")]
    assert bridge.from_server(b"[1]") == [Forward(HOST, b"[1]")]
    assert isinstance(bridge.toward_server(request(1, "ping"))[0], Send)


# -- 2025-11-25 host → 2026-07-28 server --------------------------------------------------------

def initialized(bridge: ModernServer) -> dict:
    """The host's `initialize`, the server's discover answer; the host's answer."""
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": CAPS, "clientInfo": INFO}})
    [discover] = sent(bridge.toward_server(init), PEER)
    assert discover["method"] == "server/discover"
    assert discover["params"]["_meta"] == envelope()
    [answer] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": discover["id"], "result": {
        "resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {}}, "ttlMs": 0,
        "cacheScope": "private", "instructions": "hi",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "new", "version": "3"}}}})), HOST)
    return answer


@pytest.fixture
def reverse() -> ModernServer:
    return ModernServer(LEGACY, lambda: LEGACY)


def test_initialize_is_answered_from_discover(reverse):
    answer = initialized(reverse)
    assert answer == {"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": {"name": "new", "version": "3"},
        "instructions": "hi"}}
    schema = json.loads((SCHEMAS / "mcp-2025-11-25.schema.json").read_text())
    assert_valid(validator_for(schema, "InitializeResult"), answer["result"])


def test_every_request_carries_the_envelope_and_the_handshake_stays_here(reverse):
    initialized(reverse)
    assert reverse.toward_server(frame({"jsonrpc": "2.0", "method": "notifications/initialized"})) == []
    assert sent(reverse.toward_server(frame({"jsonrpc": "2.0", "id": 1, "method": "ping"})), HOST) == [
        {"jsonrpc": "2.0", "id": 1, "result": {}}]
    set_level = frame({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}})
    assert sent(reverse.toward_server(set_level), PEER) == []
    call = frame({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "_meta": {
        "progressToken": 1}}})
    [out] = sent(reverse.toward_server(call), PEER)
    assert out["params"]["_meta"] == {"progressToken": 1, **envelope(), "io.modelcontextprotocol/logLevel": "debug"}
    cancel = frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
    assert reverse.toward_server(cancel) == [Forward(PEER, cancel)]


def test_what_comes_during_discover_waits_for_it(reverse):
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}})
    [discover] = sent(reverse.toward_server(init), PEER)
    assert reverse.toward_server(frame({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})) == []
    writes = reverse.from_server(frame({"jsonrpc": "2.0", "id": discover["id"], "result": {"capabilities": {}}}))
    assert [(w.to, json.loads(w.data).get("method")) for w in writes] == [(HOST, None), (PEER, "tools/list")]


def test_what_the_reverse_bridge_cannot_carry(reverse):
    initialized(reverse)
    [error] = sent(reverse.toward_server(frame({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe",
                                                "params": {"uri": "file:///a"}})), HOST)
    assert error["error"]["data"] == {"feature": "resources/subscribe", "hostEra": LEGACY, "serverEra": MODERN}
    [asks] = sent(reverse.from_server(frame({"jsonrpc": "2.0", "id": 5, "result": {
        "resultType": "input_required", "inputRequests": {}}})), HOST)
    assert asks["id"] == 5 and "input_required" in asks["error"]["message"]
    result = frame({"jsonrpc": "2.0", "id": 6, "result": {"resultType": "complete", "tools": []}})
    assert reverse.from_server(result) == [Forward(HOST, result)]  # 2025-11-25 results take unknown fields


def test_a_refused_discover_is_initialize_s_error(reverse):
    [discover] = sent(reverse.toward_server(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize"})), PEER)
    [answer] = sent(reverse.from_server(frame({"jsonrpc": "2.0", "id": discover["id"],
                                               "error": {"code": -32022, "message": "no"}})), HOST)
    assert answer["id"] == 0 and answer["error"]["code"] == -32022


def test_an_auto_route_lets_a_2026_07_28_host_through():
    bridge = ModernServer("auto", lambda: MODERN)
    discover = request(1, "server/discover")
    assert bridge.toward_server(discover) == [Forward(PEER, discover)]
    assert BRIDGES == {LEGACY: LegacyServer, MODERN: ModernServer}


def test_each_host_request_the_bridge_takes_is_counted_once_and_its_own_never():
    """`Recorder.bridged` (the console's era mix): the host's requests, whether carried, held for the
    session, or answered here; not the bridge's own `initialize`, nor a host that passes through."""
    from bridge.telemetry import Recorder

    recorder = Recorder(route="fs", log=None)
    bridge = LegacyServer(MODERN, lambda: MODERN, recorder)
    opened(bridge, request(1, "tools/list"))
    bridge.toward_server(request(2, "ping"))
    bridge.toward_server(frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}))
    assert recorder.bridged_requests == {("fs", MODERN, LEGACY): 2}
    reverse = ModernServer(LEGACY, lambda: LEGACY, recorder)
    initialized(reverse)
    passing = LegacyServer("auto", lambda: LEGACY, recorder)
    passing.toward_server(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    passing.toward_server(request(2, "tools/list"))
    assert recorder.bridged_requests == {("fs", MODERN, LEGACY): 2, ("fs", LEGACY, MODERN): 1}


# -- subscriptions/listen in front of a 2025-11-25 server (stdio: the listen stays open as the stream)

SUB = "io.modelcontextprotocol/subscriptionId"
LISTING = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "logging": {}}


def listening() -> LegacyServer:
    bridge = LegacyServer(MODERN, lambda: MODERN, streams=True)
    opened(bridge, request(0, "tools/list"), {"protocolVersion": LEGACY, "capabilities": LISTING})
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 0, "result": {"tools": []}}))
    return bridge


def notification(method: str, **params) -> bytes:
    return frame({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})


def test_a_listen_is_acknowledged_with_what_the_server_can_honour():
    bridge = listening()
    filters = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["file:///a"],
               "reminders": True}
    writes = bridge.toward_server(request("L1", "subscriptions/listen",
                                          envelope(**{"io.modelcontextprotocol/logLevel": "info"}),
                                          notifications=filters))
    assert [(m["method"], m["params"]) for m in sent(writes, PEER)] == [
        ("resources/subscribe", {"uri": "file:///a"}), ("logging/setLevel", {"level": "info"})]
    [ack] = sent(writes, HOST)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    # no prompts on this server; reminders are the flow's to echo
    assert ack["params"] == {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]},
                             "_meta": {SUB: "L1"}}
    assert_valid(validator_for(SCHEMA, "SubscriptionsAcknowledgedNotification"), ack)
    # a second stream on the same URI subscribes nothing more upstream
    again = bridge.toward_server(request(2, "subscriptions/listen", notifications={"resourceSubscriptions": ["file:///a"]}))
    assert sent(again, PEER) == []


def test_server_notifications_go_on_each_stream_that_takes_them_stamped():
    bridge = listening()
    bridge.toward_server(request("L1", "subscriptions/listen", notifications={"toolsListChanged": True}))
    bridge.toward_server(request("L2", "subscriptions/listen", notifications={"resourceSubscriptions": ["file:///a"]}))
    changed = sent(bridge.from_server(notification("notifications/tools/list_changed")), HOST)
    assert changed == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "L1"}}}]
    updated = sent(bridge.from_server(notification("notifications/resources/updated", uri="file:///a")), HOST)
    assert [(m["params"]["uri"], m["params"]["_meta"][SUB]) for m in updated] == [("file:///a", "L2")]
    assert bridge.from_server(notification("notifications/resources/updated", uri="file:///b")) == []
    assert bridge.from_server(notification("notifications/prompts/list_changed")) == []
    assert bridge.from_server(notification("notifications/message", level="info", data="x")) == []  # no stream asked


def test_a_cancelled_listen_ends_its_stream_and_its_subscriptions():
    bridge = listening()
    bridge.toward_server(request("L1", "subscriptions/listen", notifications={"resourceSubscriptions": ["file:///a"]}))
    cancel = notification("notifications/cancelled", requestId="L1")
    [unsubscribe] = sent(bridge.toward_server(cancel), PEER)
    assert (unsubscribe["method"], unsubscribe["params"]) == ("resources/unsubscribe", {"uri": "file:///a"})
    assert bridge.from_server(notification("notifications/resources/updated", uri="file:///a")) == []
    other = notification("notifications/cancelled", requestId=9)
    assert bridge.toward_server(other) == [Forward(PEER, other)]  # a request's: the server's to hear
    # over HTTP a listen ends with its response: the same, and nothing for one already over
    bridge.toward_server(request("L2", "subscriptions/listen", notifications={"resourceSubscriptions": ["file:///b"]}))
    assert [m["params"] for m in sent(bridge.ended("L2"), PEER)] == [{"uri": "file:///b"}]
    assert bridge.ended("L2") == [] and bridge.ended("L1") == []


def test_an_ambient_reminder_is_stamped_for_the_stream_that_opted_in():
    """No request under way: the reminder belongs to no request, so it is the listen stream's (the
    flow puts it on the one that opted in, or holds it for the fallback when none did)."""
    bridge = listening()
    reminder = notification("notifications/message", level="info", data="b",
                            _meta={"harn": {"reminder": {"body": "b"}}})
    [held] = sent(bridge.from_server(reminder), HOST)
    assert held["params"]["_meta"][SUB] is None
    bridge.toward_server(request("L1", "subscriptions/listen", notifications={"reminders": True}))
    [streamed] = sent(bridge.from_server(reminder), HOST)
    assert streamed["params"]["_meta"] == {"harn": {"reminder": {"body": "b"}}, SUB: "L1"}


def test_reverse_notifications_ride_one_listen_upstream():
    """Over stdio: what a 2025-11-25 host gets unasked (the list changes the server declares) and
    the resources it subscribes to become one listen, opened anew when the URIs change."""
    bridge = ModernServer(LEGACY, lambda: LEGACY, streams=True)
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}})
    [discover] = sent(bridge.toward_server(init), PEER)
    caps = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
    writes = bridge.from_server(frame({"jsonrpc": "2.0", "id": discover["id"], "result": {"capabilities": caps}}))
    [first] = sent(writes, PEER)
    assert (first["method"], first["params"]["notifications"]) == ("subscriptions/listen", {"toolsListChanged": True})
    subscribe = frame({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "file:///a"}})
    writes = bridge.toward_server(subscribe)
    cancel, second = sent(writes, PEER)
    assert cancel == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": first["id"]}}
    assert second["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}
    assert sent(writes, HOST) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    ack = frame({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                 "params": {"notifications": {}, "_meta": {SUB: second["id"]}}})
    assert bridge.from_server(ack) == []  # no 2025-11-25 counterpart
    old = frame({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: first["id"]}}})
    new = frame({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: second["id"]}}})
    assert bridge.from_server(old) == []
    assert bridge.from_server(new) == [Forward(HOST, new)]
    ended = frame({"jsonrpc": "2.0", "id": second["id"], "result": {"resultType": "complete", "_meta": {}}})
    assert bridge.from_server(ended) == []


@pytest.mark.parametrize("caps", [{"reminders": {"emit": True}}, {"_meta": {"harn": {"reminders": {"emit": True}}}}])
def test_reverse_a_server_that_declares_reminders_gets_them_on_the_listen(caps):
    """Its ambient reminders ride a listen whose filter has `reminders: true` (spec §3), so the
    bridge's one listen asks for them, standard or Harn's declaration alike."""
    bridge = ModernServer(LEGACY, lambda: LEGACY, streams=True)
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}})
    [discover] = sent(bridge.toward_server(init), PEER)
    [listen] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": discover["id"],
                                               "result": {"capabilities": caps}})), PEER)
    assert (listen["method"], listen["params"]["notifications"]) == ("subscriptions/listen", {"reminders": True})


def test_reverse_subscriptions_are_bounded_in_count():
    """Every subscribed URI rides each listen upstream: past the bound the host's subscribe gets an
    error that says why, and the listen stays as it was."""
    bridge = ModernServer(LEGACY, lambda: LEGACY, streams=True)
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}})
    [discover] = sent(bridge.toward_server(init), PEER)
    bridge.from_server(frame({"jsonrpc": "2.0", "id": discover["id"],
                              "result": {"capabilities": {"resources": {"subscribe": True}}}}))
    bridge.state.uris.extend(f"file:///{n}" for n in range(SUBSCRIBED_URIS))
    over = frame({"jsonrpc": "2.0", "id": 9, "method": "resources/subscribe", "params": {"uri": "file:///more"}})
    writes = bridge.toward_server(over)
    assert sent(writes, PEER) == []
    [refused] = sent(writes, HOST)
    assert refused["id"] == 9 and "1024 resources" in refused["error"]["message"]
    assert "file:///more" not in bridge.state.uris


# -- server→client requests ↔ input_required results (stdio) --------------------------------------

SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 4}}


def test_a_server_request_answers_the_host_request_input_required_and_the_retry_answers_it():
    bridge = LegacyServer(MODERN, lambda: MODERN, streams=True)
    opened(bridge, request(0, "tools/list", envelope(caps={"sampling": {}})))
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 0, "result": {"tools": []}}))
    bridge.toward_server(request(5, "tools/call", envelope(caps={"sampling": {}}), name="ask"))
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE})), HOST)
    result = suspended["result"]
    assert suspended["id"] == 5 and result["resultType"] == "input_required"
    assert list(result["inputRequests"].values()) == [SAMPLE]
    assert_valid(validator_for(SCHEMA, "InputRequiredResult"), result)
    answer = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "resultType": "complete"}
    retry = request(6, "tools/call", envelope(caps={"sampling": {}}), name="ask", requestState=result["requestState"],
                    inputResponses={k: answer for k in result["inputRequests"]})
    [to_server] = sent(bridge.toward_server(retry), PEER)
    assert to_server == {"jsonrpc": "2.0", "id": 70, "result": {k: v for k, v in answer.items() if k != "resultType"}}
    [done] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 5, "result": {"content": []}})), HOST)
    assert done == {"jsonrpc": "2.0", "id": 6, "result": {"resultType": "complete", "content": []}}


def test_a_server_request_the_host_cannot_take_is_refused_naming_it():
    bridge = LegacyServer(MODERN, lambda: MODERN, streams=True)
    opened(bridge, request(0, "tools/list"))
    [refused] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 71, "method": "roots/list"})), PEER)
    assert refused["error"]["data"] == {"feature": "roots/list", "capability": "roots", "hostEra": MODERN,
                                        "serverEra": LEGACY}
    bridge = LegacyServer(MODERN, lambda: MODERN, streams=True)
    opened(bridge, request(0, "tools/list", envelope(caps={"sampling": {}})))
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 0, "result": {"tools": []}}))
    [idle] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 72, **SAMPLE})), PEER)
    assert "no request of the host is under way" in idle["error"]["message"]


def test_reverse_input_required_becomes_host_requests_and_a_retry(reverse):
    reverse.streams = True
    init = frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {"sampling": {}}}})
    [discover] = sent(reverse.toward_server(init), PEER)
    reverse.from_server(frame({"jsonrpc": "2.0", "id": discover["id"], "result": {"capabilities": {}}}))
    call = frame({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "consult"}})
    reverse.toward_server(call)
    needed = {"resultType": "input_required", "inputRequests": {"q": SAMPLE}, "requestState": "st"}
    [ask] = sent(reverse.from_server(frame({"jsonrpc": "2.0", "id": 3, "result": needed})), HOST)
    assert {k: ask[k] for k in ("method", "params")} == SAMPLE
    answer = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    [again] = sent(reverse.toward_server(frame({"jsonrpc": "2.0", "id": ask["id"], "result": answer})), PEER)
    assert again["id"] == 3 and again["params"]["inputResponses"] == {"q": answer}
    assert again["params"]["requestState"] == "st" and again["params"]["name"] == "consult"
    done = frame({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete", "content": []}})
    assert reverse.from_server(done) == [Forward(HOST, done)]
    # a host without the capability: its request gets the error naming it
    reverse.state.envelope["io.modelcontextprotocol/clientCapabilities"] = {}
    reverse.toward_server(frame({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "consult"}}))
    [error] = sent(reverse.from_server(frame({"jsonrpc": "2.0", "id": 4, "result": needed})), HOST)
    assert error["id"] == 4 and error["error"]["data"] == {"feature": "sampling/createMessage", "capability": "sampling",
                                                           "hostEra": LEGACY, "serverEra": MODERN}


def test_what_waits_for_the_handshake_is_bounded_and_a_request_past_it_is_told_why(bridge):
    """A host that floods while `initialize` is under way gets an error for each request the wait
    has no room for; what was held goes on, in order, once the server answers."""
    from bridge.pipeline.eras import HELD_MESSAGES, WAIT_FULL

    [init] = sent(bridge.toward_server(request(0, "tools/list")), PEER)
    for n in range(1, HELD_MESSAGES):
        assert bridge.toward_server(request(n, "tools/list")) == []
    [refused] = sent(bridge.toward_server(request("over", "tools/list")), HOST)
    assert refused["id"] == "over" and refused["error"]["code"] == WAIT_FULL
    assert "wait for the server's handshake" in refused["error"]["message"]
    note = frame({"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {}})
    assert bridge.toward_server(note) == []  # a notification past the bound is let go
    answer = {"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": LEGACY, "capabilities": {},
                                                             "serverInfo": {"name": "old", "version": "2"}}}
    after = sent(bridge.from_server(frame(answer)), PEER)
    assert [m["id"] for m in after if m.get("method") == "tools/list"] == list(range(HELD_MESSAGES))
    assert bridge.state.held == [] and bridge.state.held_bytes == 0


def test_the_wait_is_bounded_in_bytes_too(bridge):
    from bridge.pipeline.eras import HELD_BYTES

    big = "x" * (HELD_BYTES // 2)
    bridge.toward_server(request(0, "tools/call", name="a", arguments={"pad": big}))
    assert bridge.toward_server(request(1, "tools/call", name="a", arguments={"pad": big}))[0].to == HOST
    assert len(bridge.state.held) == 1


def test_where_a_message_came_tells_a_request_s_from_an_ambient_one():
    """Over HTTP the transport says where the server's message came: on a request's answer stream
    it is that request's (its reminder, its log line, its server request); on the GET stream it is
    ambient, whatever is under way."""
    from bridge.pipeline.eras import GET_STREAM

    bridge = listening()
    caps = {**CAPS, "sampling": {}}
    bridge.state.session = json.dumps([caps, INFO], sort_keys=True)
    bridge.toward_server(request(7, "tools/call", envelope(caps=caps), name="a"))
    bridge.toward_server(request(8, "tools/call", envelope(caps=caps, **{"io.modelcontextprotocol/logLevel": "info"}),
                                 name="b"))
    harn = {"harn": {"reminder": {"id": "r", "body": "x"}}}
    reminder = frame({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "logger": "harn.reminder", "data": "x", "_meta": harn}})
    assert bridge.from_server(reminder, 7) == [Forward(HOST, reminder)]
    [ambient] = sent(bridge.from_server(reminder, GET_STREAM), HOST)
    assert ambient["params"]["_meta"][SUB] is None  # no stream opted in: held for the fallback
    standard = notification("notifications/reminder", reminder={"id": "s", "body": "y"})
    [ambient] = sent(bridge.from_server(standard, GET_STREAM), HOST)  # the standard form alike, never a log line
    assert ambient["params"]["_meta"][SUB] is None and ambient["params"]["reminder"]["id"] == "s"
    log = notification("notifications/message", level="info", data="l")
    assert bridge.from_server(log, 8) == [Forward(HOST, log)]
    assert bridge.from_server(log, 7) == [] and bridge.from_server(log, GET_STREAM) == []
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE}), 7), HOST)
    assert suspended["id"] == 7 and suspended["result"]["resultType"] == "input_required"  # not the newest, 8

# -- what an HTTP transport asks of the bridge (`stdio --upstream`) -------------------------------

def test_legacy_headers_are_the_settled_version_once_initialize_answered(bridge):
    assert bridge.http_headers(b"") == {}  # `initialize` itself: nothing settled yet
    opened(bridge, request(1, "tools/list"))
    assert bridge.http_headers(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})) == {
        "MCP-Protocol-Version": LEGACY}
    assert bridge.http_headers(b"") == {"MCP-Protocol-Version": LEGACY}  # the GET stream, the DELETE


def test_modern_headers_mirror_each_request_and_name_the_era_on_the_rest(reverse):
    initialized(reverse)
    [call] = sent(reverse.toward_server(frame({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                "params": {"name": "echo"}})), PEER)
    assert reverse.http_headers(frame(call)) == {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
                                                 "Mcp-Name": "echo"}
    cancel = frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert reverse.http_headers(cancel) == {"MCP-Protocol-Version": MODERN}


def test_a_failed_request_is_answered_through_the_bridge(bridge):
    """An upstream that cannot take the bridge's `initialize`: every request that waited for it is
    answered with the error, as the server's answer would have been."""
    [init] = sent(bridge.toward_server(request(1, "tools/list")), PEER)
    assert bridge.toward_server(request(2, "prompts/list")) == []  # waits for the session too
    error = {"code": -32603, "message": "cannot connect"}
    answers = sent(bridge.failed(frame(init) + b"\n" + frame({"jsonrpc": "2.0", "method": "x"}), error), HOST)
    assert [a["id"] for a in answers] == [1, 2]
    assert all("cannot connect" in a["error"]["message"] and "refused initialize" in a["error"]["message"]
               for a in answers)


def test_a_request_answered_input_required_is_carried_on_until_its_retry_is_answered():
    bridge = ModernServer(LEGACY, lambda: LEGACY, streams=True)
    initialized(bridge)
    bridge.state.envelope["io.modelcontextprotocol/clientCapabilities"] = {"sampling": {}}  # the host can sample
    call = frame({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "consult"}})
    [upstream] = sent(bridge.toward_server(call), PEER)
    assert not bridge.carried(frame(upstream))
    ask = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}
    [question] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 5, "result": {
        "resultType": "input_required", "inputRequests": {"q": ask}, "requestState": "s"}})), HOST)
    assert bridge.carried(frame(upstream))  # waiting for the host's answer
    [retry] = sent(bridge.toward_server(frame({"jsonrpc": "2.0", "id": question["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}})), PEER)
    assert retry["params"]["requestState"] == "s" and bridge.carried(frame(upstream))  # the retry is under way
    bridge.from_server(frame({"jsonrpc": "2.0", "id": 5, "result": {"resultType": "complete", "content": []}}))
    assert not bridge.carried(frame(upstream))


def test_a_request_s_stream_after_its_input_required_answer_is_no_exchange_s_then_the_retry_s():
    """Over HTTP: once a request was answered `input_required`, what its stream brings is held as
    ambient (no exchange of the host waits) until the host retries; after that, the retry's."""
    bridge = listening()
    caps = {**CAPS, "sampling": {}}
    bridge.state.session = json.dumps([caps, INFO], sort_keys=True)
    bridge.toward_server(request(7, "tools/call", envelope(caps=caps), name="a"))
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 70, **SAMPLE}), 7), HOST)
    harn = {"harn": {"reminder": {"id": "r", "body": "x"}}}
    reminder = frame({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "logger": "harn.reminder", "data": "x", "_meta": harn}})
    [held] = sent(bridge.from_server(reminder, 7), HOST)
    assert held["params"]["_meta"][SUB] is None  # stamped ambient: the flow holds it for the fallback
    assert bridge.answering(7) == 7
    answer = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    bridge.toward_server(request(9, "tools/call", envelope(caps=caps), name="a",
                                 requestState=suspended["result"]["requestState"], inputResponses={"request": answer}))
    assert bridge.answering(7) == 9  # the transport gives what follows to the retry's exchange
    assert bridge.from_server(reminder, 7) == [Forward(HOST, reminder)]


def test_a_request_its_host_left_is_cancelled_upstream_and_what_its_stream_brings_is_held():
    """Over HTTP a 2026-07-28 host cancels by closing the request's stream (`ended`): the server is
    told `notifications/cancelled` for that request (for a retry: the request it stands for), and
    a reminder its stream still brings is ambient, held for the fallback."""
    bridge = listening()
    caps = {**CAPS, "sampling": {}}
    bridge.state.session = json.dumps([caps, INFO], sort_keys=True)
    bridge.toward_server(request(7, "tools/call", envelope(caps=caps), name="a"))
    [cancel] = sent(bridge.ended(7), PEER)
    assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == 7
    assert bridge.ended(7) == []  # once
    harn = {"harn": {"reminder": {"id": "r", "body": "x"}}}
    reminder = frame({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "logger": "harn.reminder", "data": "x", "_meta": harn}})
    [held] = sent(bridge.from_server(reminder, 7), HOST)
    assert held["params"]["_meta"][SUB] is None
    bridge.toward_server(request(8, "tools/call", envelope(caps=caps), name="b"))
    [suspended] = sent(bridge.from_server(frame({"jsonrpc": "2.0", "id": 80, **SAMPLE}), 8), HOST)
    answer = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    bridge.toward_server(request(9, "tools/call", envelope(caps=caps), name="b",
                                 requestState=suspended["result"]["requestState"], inputResponses={"request": answer}))
    [cancel] = sent(bridge.ended(9), PEER)
    assert cancel["params"]["requestId"] == 8 and bridge.answering(8) == 8


def test_what_a_2026_07_28_server_refuses_unread_is_the_bridge_s_to_say():
    """(HTTP answers it with 400: the transport only sends what the bridge says.)"""
    call = json.loads(request(1, "tools/call", name="a"))
    assert LegacyServer.refuses(call, MODERN) is None
    assert LegacyServer.refuses({"jsonrpc": "2.0", "method": "notifications/x"}, None) is None  # the flow's to judge
    no_caps = json.loads(request(1, "tools/call", {"io.modelcontextprotocol/protocolVersion": MODERN}))
    assert LegacyServer.refuses(no_caps, MODERN)["error"]["code"] == -32602
    assert LegacyServer.refuses(call, "2026-01-01")["error"]["code"] == -32020
    old = json.loads(request(1, "tools/call", envelope(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})))
    assert LegacyServer.refuses(old, "2099-01-01")["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
