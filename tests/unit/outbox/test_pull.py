"""The pull half (`OutboxPull`) on the MCP flow, frame by frame with a hand-driven clock
(docs/outbox.md): when polls start in each era, what they carry, what becomes of their answers,
restarts, and the policy on reminders made from events."""
from __future__ import annotations

from bridge.outbox.pull import Asked, OutboxPull
from bridge.state.scope import Scope
from tests.unit.outbox.link import MODERN, PULL, UNLISTENING, Link, event, only_poll, query, reminders, to_reminder_wire


def test_legacy_polls_start_after_initialized_and_answers_never_reach_the_host(tmp_path):
    link = Link(tmp_path, PULL)
    [(_, result)] = link.legacy_handshake()
    assert result["result"]["capabilities"]["reminders"] == {
        "emit": True, "propagate": ["session"], "roleHints": ["user_block"]}  # what the host will get
    first = only_poll(link.tick())
    assert first["method"] == "resources/read" and "_meta" not in first["params"]
    assert query(first) == {"maxEvents": "50", "maxAgeMs": "3600000"}  # bootstrap: no cursor
    assert link.answer(first, [], cursor="0", nextPollMs=2000) == []  # consumed, not forwarded
    assert link.tick(1.0) == []
    second = only_poll(link.tick(1.0))
    assert query(second)["cursor"] == "0"
    out = link.answer(second, [event("e1", subject="acme.test", title="acme.test is active"), event("e2")],
                      cursor="2", nextPollMs=60_000)
    assert [r["dedupeKey"] if "dedupeKey" in r else r["body"] for r in reminders(out)] == [
        "domain.active:acme.test", "domain.active"]
    assert link.tick(9.0) == [] and query(only_poll(link.tick(1.0)))["cursor"] == "2"  # ceiling 10 s
    assert link.flow.recorder.count("rewritten", "mcp") == 2


def test_modern_polls_carry_the_hosts_envelope_and_wait_for_a_successful_discover(tmp_path):
    link = Link(tmp_path, PULL)
    meta = {**MODERN}
    link.host({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
    link.peer({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}})
    assert link.tick() == []  # a failed probe: the host falls back to initialize, no modern poll
    link.host({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta}})
    link.peer({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                                                     "capabilities": {}, "ttlMs": 0, "cacheScope": "private"}})
    poll = only_poll(link.tick())
    assert poll["params"]["_meta"] == MODERN  # protocol version, client capabilities and info, as the host sent them


def test_modern_host_without_a_probe_commits_with_its_first_request(tmp_path):
    link = Link(tmp_path, PULL)
    link.host({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": MODERN}})
    assert only_poll(link.tick())["params"]["_meta"] == MODERN


def test_events_extension_is_polled_through_events_poll(tmp_path):
    link = Link(tmp_path, PULL)
    link.modern_handshake({"extensions": {"io.modelcontextprotocol/events": {}}})
    # a 2026-07-28 host gets an ambient reminder on a listen stream that opted in (spec §3)
    link.host({"jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": {
        "notifications": {"reminders": True}, "_meta": {**MODERN, "io.modelcontextprotocol/clientCapabilities":
                                                        link.host_caps}}})
    link.peer({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
        "notifications": {}, "_meta": {"io.modelcontextprotocol/subscriptionId": "l1"}}})
    listing = only_poll(link.tick())
    assert listing["method"] == "events/list"
    out = link.peer({"jsonrpc": "2.0", "id": listing["id"], "result": {"resultType": "complete", "events": [
        {"name": "email.received", "delivery": ["poll", "push"], "inputSchema": {"type": "object"}},
        {"name": "build.failed", "delivery": ["webhook"], "inputSchema": {"type": "object"}},
        {"name": "repo.pushed", "delivery": ["poll"], "inputSchema": {"type": "object", "required": ["repo"]}}]}})
    poll = only_poll(out)
    assert poll["method"] == "events/poll"
    params = poll["params"]
    assert (params["name"], params["arguments"], params["cursor"], params["maxEvents"]) == ("email.received", {}, None, 50)
    assert params["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {  # the host's, declaring the extension
        "reminders": {}, "extensions": {"io.modelcontextprotocol/events": {}}}
    assert link.answer(poll, [], cursor="h1") == []
    assert link.tick(1.75) == []
    again = only_poll(link.tick(0.25))  # quiet: 2 s later
    assert again["params"]["cursor"] == "h1"
    [got] = reminders(link.answer(again, [event("m1", name="email.received")], cursor="h2"))
    assert got["body"] == "email.received"


def test_has_more_polls_again_at_once(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    first = only_poll(link.tick())
    out = link.answer(first, [event("e1")], cursor="1", hasMore=True, nextPollMs=60_000)
    assert [to for to, _ in out] == ["host", "peer"]
    assert query(out[1][1])["cursor"] == "1"


def test_a_malformed_event_is_dropped_alone_and_counted(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    out = link.answer(only_poll(link.tick()), [event("e1"), {"eventId": "e2", "name": "bad event"}, "junk", event("e3")])
    assert [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in reminders(out)] == ["e1", "e3"]
    assert link.flow.recorder.count("invalid", "mcp") == 2
    dropped = [line for line in link.log.lines if line["event"] == "invalid"]
    assert "event 1 (e2) dropped: `name` is not a string" in dropped[0]["why"]
    assert "event 2 dropped: the event is not an object" in dropped[1]["why"]


def test_a_malformed_answer_keeps_the_cursor_and_backs_off(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    link.answer(only_poll(link.tick()), [], cursor="5")
    broken = only_poll(link.tick(2.0))  # quiet: backed off to 2 s
    assert link.peer({"jsonrpc": "2.0", "id": broken["id"], "result": {"contents": [{"uri": "x", "text": "{"}]}}) == []
    assert link.tick(1.0) == [] and link.tick(1.0)  # backed off 2 s
    failure = next(line for line in link.log.lines if line["event"] == "outbox_poll_failed")
    assert "not JSON" in failure["why"] and "the cursor stays" in failure["why"]


def test_errors_back_off_and_a_lost_answer_times_out(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    first = only_poll(link.tick())
    assert link.peer({"jsonrpc": "2.0", "id": first["id"], "error": {"code": -32002, "message": "gone"}}) == []
    assert link.tick(1.5) == []
    lost = only_poll(link.tick(0.5))
    assert link.tick(29.0) == []  # waiting for the answer
    retry = only_poll(link.tick(1.5) or link.tick(4.0))  # timed out at 30 s, then backed off
    assert retry["id"] != lost["id"]
    assert link.answer(lost, [event("late")], cursor="9") == []  # a late answer is dropped, never forwarded
    assert query(retry).get("cursor") is None


def test_truncated_answers_produce_one_gap_reminder(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    out = link.answer(only_poll(link.tick()), [event("e9")], cursor="9", truncated=True)
    gap, got = reminders(out)
    assert gap["body"].startswith("Some events from acme://n were missed")
    assert gap["tags"] == ["outbox.truncated", "level:attention"] and gap["dedupeKey"] == "outbox.truncated:r|acme://n"
    assert got["_meta"]["reminder-bridge/event"]["event"]["eventId"] == "e9"
    assert any(line["event"] == "outbox_truncated" for line in link.log.lines)


def test_a_restart_neither_loses_nor_repeats(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    first = only_poll(link.tick())
    link.pull.store.mark_delivered = lambda rowids: None  # dies between storing and handing over
    link.answer(first, [event("e1"), event("e2")], cursor="2")
    restarted = Link(tmp_path, PULL)
    restarted.legacy_handshake()
    out = restarted.tick()
    assert [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in reminders(out[:-1])] == ["e1", "e2"]
    poll = out[-1][1]
    assert query(poll)["cursor"] == "2"  # no bootstrap: it resumes
    # e2 comes again from the server (at-least-once): stored once, sent once
    assert reminders(restarted.answer(poll, [event("e2"), event("e3")], cursor="3")) == [
        to_reminder_wire("r|acme://n", event("e3"))]
    third = Link(tmp_path, PULL)
    third.legacy_handshake()
    assert query(only_poll(third.tick()))["cursor"] == "3"


def test_a_host_without_reminder_support_gets_them_in_the_next_tool_result(tmp_path):
    link = Link(tmp_path, PULL, host_caps={})
    link.legacy_handshake()
    assert link.answer(only_poll(link.tick()), [event("e1", title="deploy finished")]) == []
    pending = link.pull.store.undelivered(link.pull.source)
    assert len(pending) == 1  # queued for the tool result: not delivered yet, so a restart re-queues it
    link.host({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}})
    [(_, result)] = link.peer({"jsonrpc": "2.0", "id": 5, "result": {"content": []}})
    assert "deploy finished</system-reminder>" in result["result"]["content"][0]["text"]
    assert link.pull.store.undelivered(link.pull.source) == []


def test_budgets_and_trust_limits_apply_to_reminders_made_from_events(tmp_path):
    link = Link(tmp_path, PULL, route_extra='[routes.r.budget]\nrate = 1\nburst = 2\n'
                                            '[routes.r.trust]\nrole_hint_ceiling = "ephemeral_cache"\n')
    link.legacy_handshake()
    out = link.answer(only_poll(link.tick()), [event("e1"), event("e2"), event("e3")])
    got = reminders(out)
    assert [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in got] == ["e1", "e2"]
    assert {r["roleHint"] for r in got} == {"ephemeral_cache"}  # lowered to the route's ceiling
    assert link.flow.recorder.count("rate_limited", "mcp") == 1
    assert sum(link.flow.recorder.budget_rejections.values()) == 1
    assert link.pull.store.undelivered(link.pull.source) == []  # decided: never handed over again


def test_requests_of_one_identity_poll_once_per_floor_and_share_what_is_held(tmp_path):
    who = Scope.identity("r", "header:authorization", "Bearer alice")
    first = Link(tmp_path, PULL, host_caps={}, scope=who)
    first.host({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": UNLISTENING}})
    poll = only_poll(first.tick())
    assert first.answer(poll, [event("mail-1")]) == []  # held for the identity's next tool result
    later = Link(tmp_path, PULL, host_caps={}, scope=who, beside=first)  # the identity's next request
    later.now = first.now
    later.host({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t", "_meta": UNLISTENING}})
    assert later.tick(0.1) == []  # within poll_floor_ms of the last poll: none, and mail-1 is claimed by the first
    later.now += 1.0
    assert only_poll(later.tick())["method"] == "resources/read"  # a floor later: it polls
    first.flow.close("the request ended")  # mail-1 was never written: it stays for the identity
    third = Link(tmp_path, PULL, host_caps={}, scope=who, beside=first)
    third.host({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t", "_meta": UNLISTENING}})
    third.tick()
    [(_, result)] = third.peer({"jsonrpc": "2.0", "id": 3, "result": {"content": []}})
    assert "domain.active" in result["result"]["content"][0]["text"]  # mail-1, in its next request's tool result
    assert third.pull.store.undelivered(third.pull.source) == []


def test_own_requests_are_kept_as_data_and_answered_by_a_bound_method(tmp_path):
    link = Link(tmp_path, PULL)
    link.legacy_handshake()
    poll = only_poll(link.tick())
    handler = link.flow.calls[poll["id"]]
    assert handler.run.__self__ is link.pull and handler.run.__func__ is OutboxPull._answered  # no closure in the flow
    assert link.pull.asked == {poll["id"]: Asked("acme://n", None)}  # what it asked, as data
    link.answer(poll, [], cursor="4")
    assert link.pull.asked == {} and poll["id"] not in link.flow.calls


def test_the_era_is_the_flows(tmp_path):
    """The pull half keeps no era of its own: whether its requests carry the 2026-07-28 envelope
    is what the MCP flow settled, asked at each request."""
    link = Link(tmp_path, PULL)
    link.modern_handshake()
    assert link.flow.modern and not hasattr(link.pull, "era")
    assert "_meta" in only_poll(link.tick())["params"]
