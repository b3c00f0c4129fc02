"""MCP pipeline rules that need no socket (spec §3): dialect learning, the 2026-07-28 logging rule,
fallbacks, stages and batches, fed frame by frame into the sans-I/O flow.

And the MCP pipeline toward a Claude Code channel host (spec §11, issue 13): the handshake it
offers, one channel event per reminder wherever it comes from, tool results left alone, and the
policy, stages and counters exactly as for any other host."""
from __future__ import annotations

import io
import json

from bridge.dialects.claude_channel import instructions
from bridge.model import Reminder
from bridge.pipeline.waiting import at_once
from bridge.pipeline.commands import HOST, Forward, Receipt, Wakeup, receipts_of, writes
from tests.flows import make_flow
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

LEGACY_CAPS = {"tools": {}, "_meta": {"harn": {"reminders": {"emit": True, "propagate": ["session"], "roleHints": ["system"]}}}}
REMINDER = {"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "logger": "harn.reminder", "data": "b",
    "_meta": {"harn": {"reminder": {"id": "r1", "body": "Rebase first.", "dedupeKey": "k"}}, "traceparent": "00-abc-def-01"}}}
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def flow_with(rules: str = "", log: io.StringIO | None = None, **kwargs):
    settings = parse_rules_text(rules).defaults if rules else None
    return make_flow("mcp", settings, Recorder(log=log or io.StringIO()), **kwargs)


def handshake(flow, host_caps, modern=False):
    if modern:
        flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
            "_meta": {**MODERN, "io.modelcontextprotocol/clientCapabilities": host_caps}}}))
        return flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": LEGACY_CAPS,
            "ttlMs": 0, "cacheScope": "private"}}))
    flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": host_caps, "clientInfo": {"name": "h", "version": "1"}}}))
    return flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-11-25", "capabilities": LEGACY_CAPS, "serverInfo": {"name": "s", "version": "1"}}}))


def test_standard_host_gets_capability_and_reminder_with_trace_context_kept():
    flow = flow_with()
    [result] = handshake(flow, {"experimental": {"reminders": {}}})
    caps = json.loads(result.data)["result"]["capabilities"]
    assert caps == {"tools": {}, "reminders": {"emit": True, "propagate": ["session"], "roleHints": ["system"]}}
    [out] = flow.from_peer(frame(REMINDER))
    msg = json.loads(out.data)
    assert msg["method"] == "notifications/reminder"
    assert msg["params"]["_meta"] == {"traceparent": "00-abc-def-01"}  # other params._meta keys survive
    assert msg["params"]["reminder"]["dedupeKey"] == "k"


def test_legacy_host_in_the_modern_era_gets_log_messages_only_for_opted_in_requests():
    flow = flow_with()
    handshake(flow, {"_meta": {"harn": {"reminders": {}}}}, modern=True)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t", "_meta": dict(MODERN)}}
    flow.from_host(frame(call))
    assert flow.from_peer(frame(REMINDER)) == []  # not opted in: held for the tool result instead
    [result] = flow.from_peer(frame({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}))
    assert json.loads(result.data)["result"]["content"] == [
        {"type": "text", "text": '<system-reminder id="r1" source="host">Rebase first.</system-reminder>'}]
    opted = {**call, "id": 3, "params": {"name": "t", "_meta": {**MODERN, "io.modelcontextprotocol/logLevel": "info"}}}
    flow.from_host(frame(opted))
    [out] = flow.from_peer(frame(REMINDER))
    assert out.data == frame(REMINDER)  # legacy host, legacy message, opted in: untouched bytes


def test_none_host_gets_reminders_appended_to_the_next_tool_result_only():
    flow = flow_with()
    handshake(flow, {})
    flow.from_host(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}))
    assert flow.from_peer(frame(REMINDER)) == []
    [out] = flow.from_peer(frame({"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": "done"}], "structuredContent": {"ok": True}}}))
    result = json.loads(out.data)["result"]
    assert result["structuredContent"] == {"ok": True}
    assert result["content"][1] == {"type": "text", "text": '<system-reminder id="r1" source="host">Rebase first.</system-reminder>'}
    flow.from_host(frame({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t"}}))
    plain = frame({"jsonrpc": "2.0", "id": 3, "result": {"content": []}})
    assert flow.from_peer(plain)[0].data == plain  # nothing pending: byte-identical


def test_an_audit_only_reminder_is_never_rendered_into_a_tool_result():
    flow = flow_with()
    handshake(flow, {})
    flow.from_host(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}))
    audit = json.loads(json.dumps(REMINDER))
    audit["params"]["_meta"]["harn"]["reminder"]["mode"] = "audit_only"
    assert flow.from_peer(frame(audit)) == []
    result = frame({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "done"}]}})
    assert flow.from_peer(result)[0].data == result  # nothing was waiting for it
    assert flow.recorder.count("dropped", "mcp") == 1


def test_the_reminders_held_for_a_tool_result_are_bounded_in_bytes_too_the_oldest_dropped_and_counted():
    flow = flow_with()
    handshake(flow, {})
    for n in range(3):
        held = json.loads(json.dumps(REMINDER))
        held["params"]["_meta"]["harn"]["reminder"]["id"] = f"r{n}"
        assert flow.from_peer(frame(held)) == []
        if n == 0:  # room for two of them
            flow.state.tool_results.max_bytes = 2 * flow.state.tool_results.bytes
    assert flow.pending_counts()["tool_result"] == 2 and flow.recorder.count("dropped", "mcp") == 1
    flow.from_host(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}))
    [out] = flow.from_peer(frame({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}))
    [block] = json.loads(out.data)["result"]["content"]
    assert 'id="r0"' not in block["text"] and 'id="r1"' in block["text"] and 'id="r2"' in block["text"]


def test_drop_fallback_and_counts():
    flow = flow_with('[defaults.fallback]\nmcp_host_none = "drop"\n')
    handshake(flow, {})
    assert flow.from_peer(frame(REMINDER)) == []
    assert flow.recorder.count("dropped", "mcp") == 1


def test_observe_stage_changes_nothing_but_counts():
    flow = flow_with('[defaults]\nstage = "observe"\n')
    handshake(flow, {"reminders": {}})
    data = frame(REMINDER)
    assert flow.from_peer(data)[0].data == data
    assert flow.recorder.count("rewritten", "mcp") >= 1


def test_dual_stage_keeps_the_legacy_decoration_beside_the_standard_message():
    flow = flow_with('[defaults]\nstage = "dual"\n')
    handshake(flow, {"reminders": {}})
    [out] = flow.from_peer(frame(REMINDER))
    msg = json.loads(out.data)
    assert msg["method"] == "notifications/reminder"
    assert msg["params"]["_meta"]["harn"]["reminder"]["id"] == "r1"


def test_batch_members_are_rewritten_and_the_rest_kept():
    flow = flow_with()
    handshake(flow, {"reminders": {}})
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    [out] = flow.from_peer(frame([log, REMINDER]))
    batch = json.loads(out.data)
    assert batch[0] == log and batch[1]["method"] == "notifications/reminder"


def test_undeclared_server_is_refused_and_logged_with_the_reason():
    log = io.StringIO()
    flow = flow_with(log=log)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}, "serverInfo": {}}}))
    assert flow.from_peer(frame(REMINDER)) == []
    assert "require_declaration" in log.getvalue()


def test_a_modern_legacy_host_gets_queued_reminders_in_the_tool_result_while_another_request_opted_in():
    """Queued for a tool result, they go in it: a log message toward a modern host is only for what
    arrives while it listens, not for what waited (issue 13 lifts them out only for hosts of their own)."""
    flow = flow_with()
    handshake(flow, {"_meta": {"harn": {"reminders": {}}}}, modern=True)
    opted = {"_meta": {**MODERN, "io.modelcontextprotocol/logLevel": "info"}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t", "_meta": dict(MODERN)}}
    flow.from_host(frame(call))
    assert flow.from_peer(frame(REMINDER)) == []  # not opted in: queued
    flow.from_host(frame({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "x", **opted}}))
    [result] = flow.from_peer(frame({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}))
    assert json.loads(result.data)["result"]["content"] == [
        {"type": "text", "text": '<system-reminder id="r1" source="host">Rebase first.</system-reminder>'}]


# ============================= toward a Claude Code channel host (spec §11) ======================
#: what the server behind a channel host declares (a Harn server that also logs)
CHANNEL_SERVER_CAPS = {"tools": {}, "logging": {},
               "_meta": {"harn": {"reminders": {"emit": True, "propagate": ["session"], "roleHints": ["system"]}}}}
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def legacy(rid: str, body: str = "a.py changed; re-read it.", **fields) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": body,
        "_meta": {"harn": {"reminder": {"id": rid, "body": body, **fields}}, "traceparent": TRACE}}}


STANDARD = {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": {
    "id": "s1", "body": "CI is red on main.", "tags": ["ci", "main"], "dedupeKey": "ci:main", "ttlTurns": 3,
    "roleHint": "developer"}}}


class Clock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def channel_flow(rules: str = "", route: str = "workspace", clock: Clock | None = None,
                 log: io.StringIO | None = None, **kwargs):
    settings = parse_rules_text(rules).defaults
    kwargs.setdefault("host_dialect", "claude-channel")
    return make_flow("mcp", settings, Recorder(route=route, log=log or io.StringIO()), clock=clock or Clock(),
                     policy=Policy(settings, route=route, state=BudgetState()), **kwargs)


def channel_handshake(flow, result: dict | None = None) -> dict:
    """Claude Code's initialize (no reminder capability at all), the server's answer; returns what the host got."""
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "2.1.80"}}}))
    result = result or {"protocolVersion": "2025-11-25", "capabilities": CHANNEL_SERVER_CAPS,
                        "serverInfo": {"name": "fs-server", "version": "1"}, "instructions": "Use the fs tools."}
    [out] = flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": result}))
    return json.loads(out.data)["result"]


def events(commands) -> list[dict]:
    sent = [json.loads(c.data) for c in writes(commands)]
    assert all(to == HOST for to in (c.to for c in writes(commands)))
    return [m["params"] for m in sent if m.get("method") == "notifications/claude/channel"]


# -- the handshake -------------------------------------------------------------------------------
def test_initialize_offers_the_channel_and_tells_the_model_what_the_events_are():
    result = channel_handshake(channel_flow())
    assert result["capabilities"] == {"tools": {}, "logging": {}, "experimental": {"claude/channel": {}}}
    assert result["instructions"] == "Use the fs tools.\n\n" + instructions("workspace")  # the route's name
    assert result["serverInfo"] == {"name": "fs-server", "version": "1"}


def test_an_unnamed_route_names_the_server_by_its_server_info():
    flow = channel_flow(route="default")
    assert '"fs-server" MCP server' in channel_handshake(flow)["instructions"]


def test_the_routes_own_paragraph_replaces_the_built_in_one():
    flow = channel_flow('[defaults]\nchannel_instructions = "Events from {server} are CI results; act on red ones."\n')
    result = channel_handshake(flow)
    assert result["instructions"] == "Use the fs tools.\n\nEvents from workspace are CI results; act on red ones."


def test_a_server_that_declares_no_reminders_is_still_offered_as_a_channel():
    """Its reminders are dropped (require_declaration), but the outbox may still have some for the host."""
    result = channel_handshake(channel_flow(), {"capabilities": {"experimental": {"x": {}}}, "serverInfo": {"name": "s"}})
    assert result["capabilities"] == {"experimental": {"x": {}, "claude/channel": {}}}
    assert result["instructions"] == instructions("workspace")


def test_the_2026_era_discover_result_is_offered_the_same_way():
    flow = channel_flow(route="default")
    flow.from_host(frame({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}))
    [out] = flow.from_peer(frame({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": CHANNEL_SERVER_CAPS,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-fs", "version": "1"}}}}))
    result = json.loads(out.data)["result"]
    assert result["capabilities"]["experimental"] == {"claude/channel": {}}
    assert result["instructions"] == instructions("modern-fs")


# -- one channel event per reminder --------------------------------------------------------------
def test_a_legacy_reminder_becomes_one_channel_event_with_identifier_string_meta():
    flow = channel_flow()
    channel_handshake(flow)
    [event] = events(flow.from_peer(frame(legacy("r1", tags=["fs", "file changed"], dedupeKey="f:a.py", ttlTurns=2,
                                                 source="stdlib_provider"))))
    assert event == {"content": "a.py changed; re-read it.",
                     "meta": {"reminder_id": "r1", "source": "provider", "tags": "fs,file changed",
                              "role_hint": "system", "dedupe_key": "f:a.py", "ttl_turns": "2"},
                     "_meta": {"traceparent": TRACE}}  # trace context carried, the legacy slot gone
    assert flow.recorder.count("channel", "mcp") == 1 and flow.recorder.count("rewritten", "mcp") == 1  # initialize


def test_a_standard_reminder_becomes_one_channel_event():
    flow = channel_flow()
    channel_handshake(flow, {"capabilities": {"reminders": {"emit": True}}, "serverInfo": {"name": "s"}})
    [event] = events(flow.from_peer(frame(STANDARD)))
    assert event == {"content": "CI is red on main.", "meta": {
        "reminder_id": "s1", "tags": "ci,main", "role_hint": "developer", "dedupe_key": "ci:main", "ttl_turns": "3"}}


def test_tool_calls_and_results_pass_untouched_and_nothing_waits_for_them():
    flow = channel_flow()
    channel_handshake(flow)
    call = frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "touch_file"}})
    assert flow.from_host(call) == [Forward("peer", call)]
    assert len(events(flow.from_peer(frame(legacy("r1"))))) == 1
    result = frame({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "touched a.py"}]}})
    [out] = flow.from_peer(result)
    assert out.data is result  # the very bytes: no fallback block, no double delivery
    assert flow.pending_counts() == {"coalesce": 0, "tool_result": 0, "ride": 0}


def test_the_servers_own_channel_events_and_plain_logs_pass_untouched():
    flow = channel_flow()
    channel_handshake(flow)
    own = frame({"jsonrpc": "2.0", "method": "notifications/claude/channel",
                 "params": {"content": "a reminder of the server's own", "meta": {"kind": "reminder"}}})
    log = frame({"jsonrpc": "2.0", "method": "notifications/message",
                 "params": {"level": "info", "logger": "fs", "data": "reminder: touched"}})
    assert flow.from_peer(own)[0].data is own and flow.from_peer(log)[0].data is log
    assert flow.recorder.count("channel") == 0


def test_audit_only_reminders_are_never_sent_and_cost_no_budget():
    flow = channel_flow('[defaults.budget]\nrate = 1\nburst = 1\n')
    channel_handshake(flow)
    assert flow.from_peer(frame(legacy("quiet", mode="audit_only"))) == []
    assert flow.recorder.count("dropped", "mcp") == 1
    assert [e["meta"]["reminder_id"] for e in events(flow.from_peer(frame(legacy("loud"))))] == ["loud"]


def test_an_invalid_reminder_is_dropped_and_counted():
    flow = channel_flow()
    channel_handshake(flow)
    assert flow.from_peer(frame(legacy("bad", ttlTurns=0))) == []
    assert flow.recorder.count("invalid", "mcp") == 1


def test_trust_limits_apply_before_the_event_is_written():
    flow = channel_flow('[defaults.trust]\nmax_body_bytes = 8\nrole_hint_ceiling = "developer"\n')
    channel_handshake(flow)
    assert flow.from_peer(frame(legacy("big", body="x" * 9))) == []
    assert flow.recorder.count("refused", "mcp") == 1
    [event] = events(flow.from_peer(frame(legacy("ok", body="a\x07b", roleHint="system"))))
    assert (event["content"], event["meta"]["role_hint"]) == ("ab", "developer")


# -- budgets ----------------------------------------------------------------------------------------
def test_a_flood_gets_the_budgets_share_as_channel_events():
    flow = channel_flow('[defaults.budget]\nrate = 1\nburst = 3\n')
    channel_handshake(flow)
    sent = [e for n in range(20) for e in events(flow.from_peer(frame(legacy(f"r{n}"))))]
    assert [e["meta"]["reminder_id"] for e in sent] == ["r0", "r1", "r2"]
    assert flow.recorder.count("channel") == 3 and flow.recorder.count("rate_limited") == 17


def test_coalesce_sends_the_newest_per_dedupe_key_when_tokens_return():
    clock = Clock()
    flow = channel_flow('[defaults.budget]\nrate = 60\nburst = 1\nover = "coalesce"\n', clock=clock)
    channel_handshake(flow)
    assert len(events(flow.from_peer(frame(legacy("r1", dedupeKey="build"))))) == 1
    assert flow.from_peer(frame(legacy("r2", dedupeKey="build"))) == [Wakeup(clock.now + 1.0)]
    assert flow.from_peer(frame(legacy("r3", dedupeKey="build"))) == []
    clock.now += 1.0
    assert [e["meta"]["reminder_id"] for e in events(flow.wake(clock.now))] == ["r3"]
    assert flow.recorder.count("channel") == 2 and flow.recorder.count("coalesced") == 2


# -- stages -----------------------------------------------------------------------------------------
def test_observe_changes_nothing_on_the_wire_and_counts_what_it_would_have_sent():
    flow = channel_flow('[defaults]\nstage = "observe"\n')
    init = frame({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": CHANNEL_SERVER_CAPS, "serverInfo": {"name": "s"}}})
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}}))
    assert flow.from_peer(init)[0].data is init
    reminder = frame(legacy("r1"))
    assert flow.from_peer(reminder)[0].data is reminder
    assert flow.recorder.staged[("mcp", "workspace", "channel", "observe")] == 1


def test_dual_keeps_the_legacy_decoration_on_the_channel_event():
    flow = channel_flow('[defaults]\nstage = "dual"\n')
    channel_handshake(flow)
    [event] = events(flow.from_peer(frame(legacy("r1"))))
    assert event["_meta"]["harn"]["reminder"]["id"] == "r1" and event["meta"]["reminder_id"] == "r1"


# -- reminders from elsewhere, and a reload ---------------------------------------------------------
def test_a_reminder_from_an_add_on_is_one_channel_event_that_carries_its_receipt():
    flow = channel_flow()
    channel_handshake(flow)
    receipt = Receipt("outbox", 1)
    out = at_once(flow.deliver(Reminder(id="o1", body="ticket 7 was reopened", tags=["tickets"]), "resources/read",
                               "outbox", receipt))
    assert [e["meta"] for e in events(out)] == [{"reminder_id": "o1", "tags": "tickets", "role_hint": "system"}]
    assert receipts_of(out) == (receipt,)  # the transport reports it once the event is written
    quiet = at_once(flow.deliver(Reminder(id="o2", body="x", mode="audit_only"), "resources/read", "outbox",
                                 Receipt("outbox", 2)))
    assert quiet == []  # never sent: done with at once (its owner is told; see the outbox's tests)


def test_reminders_queued_for_a_tool_result_are_lifted_out_of_it_after_a_reload():
    log = io.StringIO()
    flow = channel_flow(host_dialect=None, log=log)  # auto: Claude Code declares nothing, so `none`
    channel_handshake(flow)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}))
    assert flow.from_peer(frame(legacy("r1"))) == []  # queued for the tool result
    flow.reconfigure(parse_rules_text('[defaults]\nhost_dialect = "claude-channel"\n').defaults)
    assert "channel_not_offered" in log.getvalue()  # this session never registered a listener
    result = frame({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "done"}]}})
    out = flow.from_peer(result)
    assert out[0] == Forward(HOST, result)  # the tool result goes on without it
    assert [e["meta"]["reminder_id"] for e in events(out[1:])] == ["r1"]
    assert flow.pending_counts()["tool_result"] == 0


def test_a_reload_warns_only_for_a_session_that_was_never_offered_the_channel():
    offered_log, early_log = io.StringIO(), io.StringIO()
    offered = channel_flow(log=offered_log)
    channel_handshake(offered)
    offered.reconfigure(parse_rules_text('[defaults]\nhost_dialect = "claude-channel"\nstage = "dual"\n').defaults)
    assert "channel_not_offered" not in offered_log.getvalue()
    early = channel_flow(host_dialect=None, log=early_log)  # reloaded before the server answered: the offer is still to come
    early.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}}))
    early.reconfigure(parse_rules_text('[defaults]\nhost_dialect = "claude-channel"\n').defaults)
    assert "channel_not_offered" not in early_log.getvalue()
    [out] = early.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": CHANNEL_SERVER_CAPS,
                                                                           "serverInfo": {"name": "s"}}}))
    assert json.loads(out.data)["result"]["capabilities"]["experimental"] == {"claude/channel": {}}


# -- channel_also_tool_result: the next tool result carries each reminder too, once ----------------------
RIDES = "[defaults]\nchannel_also_tool_result = true\n"


def tool_call(call_id: int, name: str = "touch_file") -> bytes:
    return frame({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {"name": name}})


def tool_result(call_id: int, text: str = "done") -> bytes:
    return frame({"jsonrpc": "2.0", "id": call_id, "result": {"content": [{"type": "text", "text": text}],
                                                               "structuredContent": {"ok": True}}})


def ride(rid: str, body: str = "a.py changed; re-read it.") -> str:
    """What a reminder looks like riding a tool result: the route's envelope (spec §6)."""
    return f'<system-reminder id="{rid}" source="provider">{body}</system-reminder>'


def riding(flow, call_id: int) -> list[str] | None:
    """A tools/call round trip: the texts the reminders add to its result (None: the result went on untouched)."""
    call = tool_call(call_id)
    assert flow.from_host(call) == [Forward("peer", call)]
    return carried(flow.from_peer(tool_result(call_id)))


def carried(commands) -> list[str] | None:
    [out] = commands
    if type(out) is Forward:
        return None
    result = json.loads(out.data)["result"]
    assert out.answers and result["content"][0] == {"type": "text", "text": "done"}
    assert result["structuredContent"] == {"ok": True}  # left untouched
    [block] = result["content"][1:]
    return block["text"].split("\n")


def pushed(flow, rid: str, **fields) -> list[str]:
    """A legacy reminder from the server: the ids of the channel events it became."""
    return [e["meta"]["reminder_id"] for e in events(flow.from_peer(frame(legacy(rid, source="stdlib_provider",
                                                                                  **fields))))]


def test_a_reminder_sent_during_a_tool_call_also_rides_its_result_and_not_the_next():
    flow = channel_flow(RIDES)
    assert channel_handshake(flow)["instructions"] == "Use the fs tools.\n\n" + instructions("workspace",
                                                                                    also_in_tool_results=True)
    call = tool_call(2)
    assert flow.from_host(call) == [Forward("peer", call)]
    assert pushed(flow, "r1") == ["r1"]  # the channel event goes at once, as without the key
    assert carried(flow.from_peer(tool_result(2))) == [ride("r1")]
    assert riding(flow, 3) is None  # seen once in a tool result: never again
    assert flow.recorder.count("channel") == 1 and flow.recorder.count("attached", "mcp") == 1
    assert flow.pending_counts()["ride"] == 0


def test_a_reminder_sent_between_tool_calls_rides_the_next_one():
    """An idle session (Claude Code drops the event, #61797): the next tool call brings it."""
    flow = channel_flow(RIDES)
    channel_handshake(flow)
    assert pushed(flow, "r1") == ["r1"] and pushed(flow, "r2") == ["r2"]
    assert flow.pending_counts()["ride"] == 2
    assert riding(flow, 2) == [ride("r1"), ride("r2")]  # one block, in arrival order
    assert riding(flow, 3) is None


def test_a_re_sent_reminder_rides_once():
    """A legacy server's retry (the same id): sent as a channel event again, attached once."""
    flow = channel_flow(RIDES)
    channel_handshake(flow)
    assert pushed(flow, "r1") == ["r1"] and pushed(flow, "r1") == ["r1"]
    assert riding(flow, 2) == [ride("r1")]
    assert pushed(flow, "r1") == ["r1"]  # after it rode
    assert riding(flow, 3) is None
    assert flow.recorder.count("channel") == 3 and flow.recorder.count("attached") == 1


def test_a_newer_reminder_with_the_same_dedupe_key_replaces_the_waiting_one():
    flow = channel_flow(RIDES)
    channel_handshake(flow)
    for rid, key in (("r1", "build"), ("r2", "lint"), ("r3", "build")):
        assert pushed(flow, rid, dedupeKey=key, body=f"{key} {rid}") == [rid]
    assert riding(flow, 2) == [ride("r2", "lint r2"), ride("r3", "build r3")]


def test_the_rides_of_a_session_are_bounded_in_count_and_bytes():
    """max_pending_per_session bounds how many wait (the oldest go first, counted); max_reminder_bytes
    bounds each of them, as on every queue."""
    flow = channel_flow(RIDES + "[defaults.trust]\nmax_pending_per_session = 2\nmax_reminder_bytes = 600\n")
    channel_handshake(flow)
    for n in range(5):
        assert pushed(flow, f"r{n}", body=f"build {n} finished") == [f"r{n}"]
        assert flow.pending_counts()["ride"] <= 2
    assert pushed(flow, "big", body="x" * 300) == []  # refused whole: neither sent nor held
    assert riding(flow, 2) == [ride("r3", "build 3 finished"), ride("r4", "build 4 finished")]
    assert flow.recorder.count("dropped") == 3 and flow.recorder.count("refused") == 1
    assert flow.recorder.count("channel") == 5 and flow.recorder.count("attached") == 2


def test_a_tool_result_that_cannot_carry_the_reminder_leaves_it_for_the_next_one():
    flow = channel_flow(RIDES)
    channel_handshake(flow)
    call = tool_call(2)
    flow.from_host(call)
    assert pushed(flow, "r1") == ["r1"]
    error = frame({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Unknown tool: nope"}})
    assert flow.from_peer(error) == [Forward(HOST, error)]
    assert riding(flow, 3) == [ride("r1")]


def test_audit_only_reminders_never_ride():
    flow = channel_flow(RIDES)
    channel_handshake(flow)
    assert pushed(flow, "quiet", mode="audit_only") == []
    assert riding(flow, 2) is None and flow.recorder.count("attached") == 0


def test_a_reminder_from_the_outbox_rides_too_and_its_receipt_goes_with_the_event():
    flow = channel_flow(RIDES)
    channel_handshake(flow)
    receipt = Receipt("outbox", 1)
    out = at_once(flow.deliver(Reminder(id="o1", body="ticket 7 was reopened", source="provider"), "resources/read",
                               "outbox", receipt))
    assert [e["meta"]["reminder_id"] for e in events(out)] == ["o1"] and receipts_of(out) == (receipt,)
    call = tool_call(2)
    flow.from_host(call)
    sent = flow.from_peer(tool_result(2))
    assert carried(sent) == [ride("o1", "ticket 7 was reopened")]
    assert receipts_of(sent) == ()  # the outbox row was done with once the event was written


def test_two_sessions_never_carry_each_others_reminders():
    first, second = channel_flow(RIDES), channel_flow(RIDES)
    channel_handshake(first), channel_handshake(second)
    assert pushed(first, "r1") == ["r1"]
    assert riding(second, 2) is None
    assert riding(first, 2) == [ride("r1")]


def test_observe_counts_the_ride_and_changes_nothing():
    flow = channel_flow(RIDES + 'stage = "observe"\n')
    channel_handshake(flow)
    reminder = frame(legacy("r1"))
    assert flow.from_peer(reminder)[0].data is reminder
    result = tool_result(2)
    flow.from_host(tool_call(2))
    assert flow.from_peer(result)[0].data is result
    assert flow.recorder.staged[("mcp", "workspace", "attached", "observe")] == 1


def test_a_reload_that_turns_the_key_on_watches_the_next_tool_call():
    flow = channel_flow()
    channel_handshake(flow)
    call = tool_call(2)
    assert flow.passes(call, HOST)  # without the key a channel host's tool calls are not even parsed
    flow.reconfigure(parse_rules_text('[defaults]\nhost_dialect = "claude-channel"\nchannel_also_tool_result = true\n')
                     .defaults)
    assert not flow.passes(call, HOST)
    flow.from_host(call)
    assert pushed(flow, "r1") == ["r1"]
    assert carried(flow.from_peer(tool_result(2))) == [ride("r1")]


def test_http_headers_mirror_a_modern_request_and_the_version_initialize_settled():
    """What `stdio --upstream` POSTs beside each host frame (MCP over HTTP checks them)."""
    from bridge.pipeline.mcp import McpFlow

    flow = McpFlow()
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'
    assert flow.http_headers(init) == {}
    flow.from_host(init)
    flow.from_peer(b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}')
    assert flow.http_headers(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}') == {"MCP-Protocol-Version": "2025-06-18"}
    modern = (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","_meta":'
              b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}')
    assert flow.http_headers(modern) == {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                         "Mcp-Name": "echo"}
