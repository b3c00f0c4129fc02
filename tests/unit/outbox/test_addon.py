"""The outbox add-on of a route (`outbox_for`): which halves it gets, the store they share, the
hot path they leave alone, and whose rows they are when both run on one flow."""
from __future__ import annotations

from tests.flows import make_flow
from bridge.rules import parse_rules_text
from bridge.state.scope import Scope
from bridge.telemetry import Recorder
from tests.unit.outbox.link import (HARN_CAPS, PULL, SERVE, UNLISTENING, Link, _Log, event, only_poll, push, read,
                                    to_reminder_wire)


def test_outbox_traffic_leaves_the_hot_path_alone(tmp_path):
    link = Link(tmp_path, PULL + SERVE)
    link.legacy_handshake()
    only_poll(link.tick())
    frame = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}'
    [send] = link.flow.from_host(frame)
    assert send.data is frame  # untouched, not even parsed
    assert link.flow.passes(b'{"jsonrpc":"2.0","id":3,"result":{"content":[]}}', "peer")


def test_observe_stage_polls_nothing(tmp_path):
    rules = parse_rules_text('[routes.r]\nprotocol = "mcp"\nstage = "observe"\n' + PULL.replace(
        "STORE", str(tmp_path / "s.sqlite3"))).routes["r"]
    log = _Log()
    flow = make_flow("mcp", rules, Recorder(route="r", log=log))
    assert flow.addons == () and log.lines[0]["event"] == "outbox_off"


def test_sessions_of_one_route_share_a_store_and_nothing_in_it(tmp_path):
    a = Link(tmp_path, PULL + SERVE, host_caps={}, scope=Scope.mcp_session("r", "session-a"))
    b = Link(tmp_path, PULL + SERVE, scope=Scope.mcp_session("r", "session-b"), beside=a)
    assert a.pull.store is b.pull.store is a.serve.store is b.serve.store
    for link in (a, b):
        link.legacy_handshake(HARN_CAPS)
    assert a.answer(only_poll(a.tick()), [event("for-a")]) == []  # a `none` host: served to a, not pushed
    a_start, b_start = read(a, "bridge://reminders")["cursor"], read(b, "bridge://reminders")["cursor"]
    push(a, "ra")
    assert only_poll(b.tick())["method"] == "resources/read"  # b's own first read, and nothing of a's
    everything = a_start.rpartition(".")[0] + ".0"
    assert read(b, f"bridge://reminders?cursor={everything}")["events"] == []
    assert [e["eventId"] for e in read(a, f"bridge://reminders?cursor={everything}")["events"]] == [
        to_reminder_wire("r|acme://n", event("for-a"))["id"], "ra"]
    assert read(b, f"bridge://reminders?cursor={b_start}")["events"] == []


def test_a_request_that_is_nobodys_has_no_outbox_and_is_told_what_to_configure(tmp_path):
    link = Link(tmp_path, PULL + SERVE, scope=Scope.request("r"))
    link.host({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": UNLISTENING}})
    assert link.tick() == []  # no poll: nothing later would carry what it found
    refused = read(link, "bridge://reminders")
    assert refused["error"]["code"] == -32600
    assert 'routes.r.serve_outbox.identity = "header:<name>"' in refused["error"]["message"]
    assert push(link, "r1") == [] and link.serve.incoming.first_tries == 0  # not recorded for anyone
