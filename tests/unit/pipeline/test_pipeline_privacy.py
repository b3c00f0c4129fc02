"""Issue 10 finding 9: an invalid reminder never puts its body or values in the log.

At the default log level the proxy logs one `invalid` line per refused reminder; that line (and
the span's `reminder.reason`) names the field and the rule, and describes the bad value only by
its JSON type and size.  The JSON-RPC error a client gets back still quotes the value it sent
itself.  Every flow that decodes reminders is driven: MCP notifications (both dialects), ACP
inject requests (both dialects) and agent updates, A2A inject, message metadata, stream events
and `reminderUpdate` frames.
"""
from __future__ import annotations

import io
import json

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.flows import make_flow
from bridge.model import ReminderError
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder, Tracing

SECRET = "sk-live-TOPSECRET-0123456789"
#: each bad reminder: (fields, the field name the message must end with)
BAD = {
    "object_body": ({"body": {"password": SECRET}}, "body"),
    "blank_body": ({"body": "      "}, "body"),  # no secret, but the value must not show either
    "enum_value": ({"body": "fine", "propagate": SECRET}, "propagate"),
    "tag_entry": ({"body": "fine", "tags": ["ok", {"token": SECRET}]}, "tags[1]"),
    "integer_field": ({"body": "fine", "ttl_turns": SECRET}, "ttl_turns"),
}


def frame(obj) -> bytes:
    return json.dumps(obj).encode()


def flow_for(protocol: str, log_level: str | None = None):
    log = io.StringIO()
    exporter = InMemorySpanExporter()
    kwargs = {} if log_level is None else {"log_level": log_level}  # None: the Recorder's default
    recorder = Recorder(route="r", log=log, tracing=Tracing(span_exporter=exporter), **kwargs)
    settings = parse_rules_text("").defaults
    flow = make_flow(protocol, settings, recorder, policy=Policy(settings, route="r", state=BudgetState()))
    return flow, recorder, log, exporter


CAMEL_NAMES = {"ttl_turns": "ttlTurns"}


def camel(fields: dict) -> dict:
    """The standard wires' spelling (the legacy ones are sent snake_case as Harn writes them)."""
    return {CAMEL_NAMES.get(k, k): v for k, v in fields.items()}


# -- one driver per place a reminder is decoded: returns the JSON-RPC error (None for notifications)
def mcp_legacy_notification(fields, log_level):
    flow, recorder, log, exporter = flow_for("mcp", log_level)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "capabilities": {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "capabilities": {"_meta": {"harn": {"reminders": {"emit": True}}}}, "serverInfo": {}}}))
    out = flow.from_peer(frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "info", "logger": "harn.reminder", "data": "x",
        "_meta": {"harn": {"reminder": {"id": "r1", **fields}}}}}))
    assert out == []
    return None, recorder, log, exporter


def mcp_standard_notification(fields, log_level):
    flow, recorder, log, exporter = flow_for("mcp", log_level)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "capabilities": {"_meta": {"harn": {"reminders": {}}}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "capabilities": {"reminders": {"emit": True}}, "serverInfo": {}}}))
    out = flow.from_peer(frame({"jsonrpc": "2.0", "method": "notifications/reminder", "params": {
        "reminder": {"id": "r1", **camel(fields)}}}))
    assert out == []
    return None, recorder, log, exporter


def _acp(log_level):
    flow, recorder, log, exporter = flow_for("acp", log_level)
    flow.from_host(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"reminders": {}}}}))
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 0, "result": {
        "agentCapabilities": {"_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"]}}}}}))
    return flow, recorder, log, exporter


def _answer(sends):
    [send] = sends
    assert send.to == "host"
    return json.loads(send.data)


def acp_standard_inject(fields, log_level):
    flow, recorder, log, exporter = _acp(log_level)
    sends = flow.from_host(frame({"jsonrpc": "2.0", "id": 7, "method": "session/inject_reminder", "params": {
        "sessionId": "s", **camel(fields)}}))
    return _answer(sends), recorder, log, exporter


def acp_legacy_inject(fields, log_level):
    flow, recorder, log, exporter = _acp(log_level)
    sends = flow.from_host(frame({"jsonrpc": "2.0", "id": 7, "method": "session/remind", "params": {
        "sessionId": "s", "mode": "finish_step", **fields}}))
    return _answer(sends), recorder, log, exporter


def acp_agent_update(fields, log_level):
    flow, recorder, log, exporter = _acp(log_level)
    out = flow.from_peer(frame({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": {
            "reminderId": "e1", **fields}}}}}}))
    assert out == []
    return None, recorder, log, exporter


def a2a_inject(fields, log_level):
    flow, recorder, log, exporter = flow_for("a2a", log_level)
    sends = flow.from_host(frame({"jsonrpc": "2.0", "id": 7, "method": "InjectTaskReminder", "params": {
        "taskId": "t1", "reminder": camel(fields)}}))
    return _answer(sends), recorder, log, exporter


def a2a_message_metadata(fields, log_level):
    flow, recorder, log, exporter = flow_for("a2a", log_level)
    sends = flow.from_host(frame({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {
        "message": {"role": "user", "taskId": "t1", "parts": [{"text": "hi"}],
                    "metadata": {"harn": {"reminder": fields}}}}}))
    return _answer(sends), recorder, log, exporter


def a2a_stream_event_metadata(fields, log_level):
    flow, recorder, log, exporter = flow_for("a2a", log_level)
    flow.from_peer(frame({"jsonrpc": "2.0", "id": 9, "result": {"statusUpdate": {
        "taskId": "t1", "contextId": "c1", "metadata": {"harn": {"reminder": fields}}}}}))
    return None, recorder, log, exporter


def a2a_reminder_update(fields, log_level):
    flow, recorder, log, exporter = flow_for("a2a", log_level)
    out = flow.from_peer(frame({"jsonrpc": "2.0", "id": 9, "result": {"reminderUpdate": {
        "taskId": "t1", "contextId": "c1", "reminder": camel(fields)}}}))
    assert out == []
    return None, recorder, log, exporter


CAMEL_DRIVERS = {mcp_standard_notification, acp_standard_inject, a2a_inject, a2a_reminder_update}
DRIVERS = [mcp_legacy_notification, mcp_standard_notification, acp_standard_inject, acp_legacy_inject,
           acp_agent_update, a2a_inject, a2a_message_metadata, a2a_stream_event_metadata, a2a_reminder_update]


@pytest.mark.parametrize("log_level", [None, "info"], ids=["default-level", "info"])
@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("drive", DRIVERS, ids=[d.__name__ for d in DRIVERS])
def test_an_invalid_reminder_logs_its_field_and_rule_but_never_its_value(drive, bad, log_level):
    fields, field_suffix = BAD[bad]
    answer, recorder, log, exporter = drive(fields, log_level)
    assert recorder.count("invalid") == 1
    text = log.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    [invalid] = [line for line in lines if line["event"] == "invalid"]
    why = invalid["why"]
    wire_suffix = CAMEL_NAMES.get(field_suffix, field_suffix) if drive in CAMEL_DRIVERS else field_suffix
    assert f"{wire_suffix}`" in why, why  # the field, as the sender spelled it
    assert "(got " in why  # and what kind of value it was
    # no value text anywhere in the log, nor on the span
    assert SECRET not in text and "TOPSECRET" not in text and "password" not in text
    assert '"   ' not in why and "'   " not in why
    reasons = [s.attributes.get("reminder.reason", "") for s in exporter.get_finished_spans()]
    assert reasons and not any("TOPSECRET" in r or '"   ' in r for r in reasons)
    if answer is not None:  # a request: the client is told what it sent, as before
        assert answer["error"]["code"] == -32602
        message = answer["error"]["message"]
        assert message.startswith("invalid reminder: `") and f"{wire_suffix}`" in message
        if "TOPSECRET" in json.dumps(fields):
            assert "TOPSECRET" in message


def test_the_loggable_text_describes_the_value_by_type_and_size():
    from bridge.dialects.acp import AcpStandard

    cases = {
        "body": ({"password": SECRET, "user": "x"}, "an object with 2 keys"),
        "ttlTurns": (SECRET, f"a string of {len(SECRET)} characters"),
        "propagate": (3, "an integer"),
        "tags": ("x" * 812, "a string of 812 characters"),
        "preserveOnCompact": ([1, 2, 3], "a list of 3 items"),
        "mode": (None, "null"),
        "firedAtTurn": (-1, "an integer"),
        "dedupeKey": (1.5, "a number"),
        "roleHint": (True, "a boolean"),
    }
    for field, (value, described) in cases.items():
        with pytest.raises(ReminderError) as info:
            AcpStandard.decode_inject({"sessionId": "s", "body": "b", **{field: value}})
        exc = info.value
        assert exc.loggable.startswith(f"invalid reminder: `params.{field}` "), exc.loggable
        assert exc.loggable.endswith(f" (got {described})"), exc.loggable
        assert str(exc).startswith(exc.loggable.rpartition(" (got ")[0])  # same field and rule
        assert "TOPSECRET" not in exc.loggable and "xxxxx" not in exc.loggable


def test_an_error_without_a_value_logs_the_same_text_it_answers():
    from bridge.dialects.acp import AcpStandard

    with pytest.raises(ReminderError) as info:
        AcpStandard.decode_inject({"sessionId": "s"})
    assert info.value.loggable == str(info.value) == "invalid reminder: `params.body` is required"
