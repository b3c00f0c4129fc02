"""The MCP codecs (`McpStandard`, `McpLegacy`): every message kind decodes and encodes to the exact
wire of spec §3, and the capabilities each dialect declares."""
from __future__ import annotations

import json

import pytest

from bridge.cli.translate import translate
from bridge.dialects.acp import AcpStandard
from bridge.dialects.mcp import McpLegacy, McpStandard
from bridge.model import ORIGINAL_KEY

FULL_STANDARD = {
    "id": "rem-1", "body": "Rebase before the next tool call.", "tags": ["upstream", "rebase"],
    "dedupeKey": "upstream:pr-1", "ttlTurns": 2, "preserveOnCompact": True, "propagate": "none",
    "roleHint": "developer", "firedAtTurn": 3,
}


def run(protocol, toward, source, target, msg) -> list[tuple[str, dict]]:
    return [(s.to, json.loads(s.data)) for s in translate(protocol, toward, source, target, json.dumps(msg).encode())]


def log_msg(meta, **params):
    return {"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x", **params, "_meta": meta}}


# ============================================================================= MCP


class TestMcpStandard:
    def test_decode_notification(self):
        msg = {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": dict(FULL_STANDARD)}}
        assert McpStandard.is_reminder(msg)
        r = McpStandard.decode(msg)
        assert (r.id, r.body, r.tags, r.dedupe_key, r.ttl_turns, r.preserve_on_compact, r.propagate, r.role_hint,
                r.fired_at_turn) == ("rem-1", FULL_STANDARD["body"], ["upstream", "rebase"], "upstream:pr-1", 2, True,
                                     "none", "developer", 3)

    def test_encode_notification_exact(self):
        r = McpStandard.decode({"method": "notifications/reminder", "params": {"reminder": dict(FULL_STANDARD)}})
        assert McpStandard.encode(r) == {"jsonrpc": "2.0", "method": "notifications/reminder",
                                         "params": {"reminder": FULL_STANDARD}}

    def test_encode_keeps_params_meta(self):
        r = McpStandard.decode({"params": {"reminder": {"id": "r", "body": "b"}}})
        out = McpStandard.encode(r, {"traceparent": "00-abc-def-01"})
        assert out["params"]["_meta"] == {"traceparent": "00-abc-def-01"}

    def test_fields_without_a_standard_slot_go_under_original(self):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "b", "mode": "audit_only", "source": "hook",
                                       "providerId": "p", "x-extra": 1})
        spec = McpStandard.encode(r)["params"]["reminder"]
        assert set(spec) == {"id", "body", "_meta"}
        assert spec["_meta"] == {ORIGINAL_KEY: {"mode": "audit_only", "source": "hook", "providerId": "p",
                                                "x-extra": 1}}
        back = McpStandard.decode({"params": {"reminder": spec}})
        assert (back.mode, back.source, back.provider_id, back.extra) == ("audit_only", "hook", "p", {"x-extra": 1})
        assert back.meta is None or ORIGINAL_KEY not in back.meta

    def test_not_a_reminder(self):
        assert not McpStandard.is_reminder({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
        assert not McpStandard.is_reminder({"jsonrpc": "2.0", "id": 1, "result": {}})

    def test_capability_read_write(self):
        cap = {"emit": True, "propagate": ["session"], "roleHints": ["system"]}
        caps = {"tools": {}, "reminders": cap}
        assert McpStandard.read_capability(caps) == cap
        assert McpStandard.read_capability({"tools": {}}) is None
        assert McpStandard.read_capability({"reminders": True}) is None
        McpStandard.write_capability(caps, None)
        assert caps == {"tools": {}}
        McpStandard.write_capability(caps, cap)
        assert caps == {"tools": {}, "reminders": cap}

    @pytest.mark.parametrize("caps, declared", [
        ({"reminders": {}}, True), ({"experimental": {"reminders": {}}}, True),
        ({"_meta": {"harn": {"reminders": {}}}}, False), ({}, False), (None, False),
    ])
    def test_host_declares(self, caps, declared):
        assert McpStandard.host_declares(caps) is declared

    @pytest.mark.parametrize("caps, key", [
        ({"reminders": {}}, ("reminders",)), ({"experimental": {"reminders": {}}}, ("experimental", "reminders")),
        ({"extensions": {"com.example/reminders": {}}}, ("extensions", "com.example/reminders")),
        ({"extensions": {"com.example/other": {}}}, None), ({"reminders": None}, ("reminders",)),
    ])
    def test_host_key_is_where_the_host_declared(self, caps, key):
        assert McpStandard.host_key(caps) == key

    def test_move_capability_to_the_hosts_key_keeps_what_is_there(self):
        caps = {"reminders": {"emit": True}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
        assert McpStandard.move_capability(caps, ("extensions", "com.example/reminders"))
        assert caps == {"extensions": {"io.modelcontextprotocol/tasks": {}, "com.example/reminders": {"emit": True}}}
        assert not McpStandard.move_capability(caps, ("experimental", "reminders"))  # nothing left to move
        assert not McpStandard.move_capability({"reminders": {}}, ("reminders",))


class TestMcpLegacy:
    PAYLOAD = {"id": "r-1", "body": "Re-read src/lib.rs.", "tags": ["workspace"], "dedupeKey": "f:src/lib.rs",
               "ttlTurns": 2, "roleHint": "system"}

    def test_decode_nested(self):
        msg = log_msg({"harn": {"reminder": dict(self.PAYLOAD)}}, logger="harn.reminder")
        assert McpLegacy.is_reminder(msg)
        r = McpLegacy.decode(msg)
        assert (r.id, r.body, r.dedupe_key, r.ttl_turns) == ("r-1", "Re-read src/lib.rs.", "f:src/lib.rs", 2)

    def test_decode_flat_dotted_key(self):
        msg = log_msg({"harn.reminder": {"id": "r-2", "body": "b", "ttl_turns": 1}})
        assert McpLegacy.is_reminder(msg)
        assert McpLegacy.decode(msg).ttl_turns == 1

    def test_decode_snake_case(self):
        msg = log_msg({"harn": {"reminder": {"body": "b", "dedupe_key": "k", "preserve_on_compact": True}}})
        r = McpLegacy.decode(msg)
        assert (r.dedupe_key, r.preserve_on_compact) == ("k", True)

    def test_encode_exact_shape(self):
        r = McpLegacy.decode(log_msg({"harn": {"reminder": dict(self.PAYLOAD)}}))
        assert McpLegacy.encode(r) == {
            "jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": "harn.reminder", "data": "Re-read src/lib.rs.",
                       "_meta": {"harn": {"reminder": self.PAYLOAD}}}}

    def test_encode_writes_camel_case_and_keeps_other_meta(self):
        r = McpLegacy.decode(log_msg({"harn": {"reminder": {"body": "b", "ttl_turns": 1, "fired_at_turn": 0}}}))
        out = McpLegacy.encode(r, {"traceparent": "t", "harn": {"origin": "watcher"}})
        assert out["params"]["_meta"]["traceparent"] == "t"
        assert out["params"]["_meta"]["harn"]["origin"] == "watcher"
        payload = out["params"]["_meta"]["harn"]["reminder"]
        assert payload["ttlTurns"] == 1 and payload["firedAtTurn"] == 0
        assert not any("_" in k for k in payload if k != "_meta")

    @pytest.mark.parametrize("msg", [
        log_msg({"com.example/trace": "abc"}, logger="db"),
        log_msg({"harn": {"origin": "x"}}),
        log_msg({"harn": "reminder"}),
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "harn.reminder",
                                                                          "data": "no meta"}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"_meta": {"harn": {"reminder": {}}}}},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": "odd"},
    ])
    def test_plain_logs_are_not_reminders(self, msg):
        assert not McpLegacy.is_reminder(msg)

    def test_plain_log_passes_through_byte_identical(self):
        raw = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"db","data":"slow"}}'
        [send] = translate("mcp", "host", "legacy", "standard", raw)
        assert send.data == raw

    def test_capability_read_write(self):
        cap = {"emit": True, "propagate": ["session", "none"], "roleHints": ["system"]}
        caps = {"tools": {}, "_meta": {"harn": {"reminders": cap}}}
        assert McpLegacy.read_capability(caps) == cap
        assert McpLegacy.host_declares(caps) and not McpLegacy.host_declares({"reminders": {}})
        McpLegacy.write_capability(caps, None)
        assert caps == {"tools": {}}  # no empty `_meta`/`harn` husks left behind
        McpLegacy.write_capability(caps, cap)
        assert caps == {"tools": {}, "_meta": {"harn": {"reminders": cap}}}
        kept = {"_meta": {"harn": {"reminders": cap, "version": 2}, "x": 1}}
        McpLegacy.write_capability(kept, None)
        assert kept == {"_meta": {"harn": {"version": 2}, "x": 1}}


class TestMcpFlowsCapabilities:
    CAP = {"emit": True, "propagate": ["session", "none"], "roleHints": ["system", "developer"]}

    def test_initialize_standard_to_legacy(self):
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "reminders": self.CAP},
                  "serverInfo": {"name": "s", "version": "1"}}
        [(to, out)] = run("mcp", "host", "standard", "legacy", {"jsonrpc": "2.0", "id": 1, "result": result})
        assert to == "host"
        assert out["result"]["capabilities"] == {"tools": {}, "_meta": {"harn": {"reminders": self.CAP}}}
        assert out["result"]["serverInfo"] == result["serverInfo"]

    def test_server_discover_legacy_to_standard(self):
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"_meta": {"harn": {"reminders": self.CAP}}},
                  "serverInfo": {"name": "s", "version": "1"}}
        [(_, out)] = run("mcp", "host", "legacy", "standard", {"jsonrpc": "2.0", "id": "d", "result": result})
        assert out["result"]["capabilities"] == {"reminders": self.CAP}
        assert out["result"]["supportedVersions"] == ["2026-07-28"]

    def test_reminder_roundtrip_through_flows(self):
        standard = {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": dict(FULL_STANDARD)}}
        [(_, legacy)] = run("mcp", "host", "standard", "legacy", standard)
        assert legacy["params"]["logger"] == "harn.reminder" and legacy["params"]["data"] == FULL_STANDARD["body"]
        [(_, again)] = run("mcp", "host", "legacy", "standard", legacy)
        assert again == standard



def test_an_unknown_field_named_like_another_dialects_id_never_lands_inline():
    """`reminderId` is Harn's id on ACP updates: a stray one on an MCP reminder (a fuzz find) must
    not be written where a Harn reader takes it for the id; it rides in the proxy's own `_meta`
    key and comes back on the way home."""
    from bridge.dialects.mcp import HARN_SHAPE, SPEC_SHAPE

    decoded = SPEC_SHAPE.decode({"id": "r1", "body": "x", "reminderId": None})
    legacy = HARN_SHAPE.encode(decoded)
    assert "reminderId" not in legacy and legacy["_meta"]["reminder-bridge/original"] == {"reminderId": None}
    assert HARN_SHAPE.decode(legacy).extra == {"reminderId": None}


def test_the_modern_envelope_keys_are_named_once_for_the_flow_and_the_outbox():
    import bridge.dialects.mcp as codecs
    import bridge.outbox.pull as pull
    import bridge.pipeline.mcp as flow
    for name in ("PROTOCOL_KEY", "CLIENT_CAPS_KEY", "CLIENT_INFO_KEY"):
        assert getattr(pull, name) is getattr(codecs, name)
    for name in ("PROTOCOL_KEY", "CLIENT_CAPS_KEY", "CLIENT_INFO_KEY", "SERVER_INFO_KEY", "LOG_LEVEL_KEY"):
        assert getattr(flow, name) is getattr(codecs, name)
    assert codecs.PROTOCOL_KEY == "io.modelcontextprotocol/protocolVersion"
