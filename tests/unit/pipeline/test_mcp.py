"""MCP pipeline rules that need no socket (spec §3): dialect learning, the 2026-07-28 logging rule,
fallbacks, stages and batches, fed frame by frame into the sans-I/O flow."""
from __future__ import annotations

import io
import json

from bridge.assembly import make_flow
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
