"""Per protocol × dialect: every message kind decodes and encodes to the exact wire of spec §3–§5."""
from __future__ import annotations

import copy
import json
import re

import pytest

from bridge.cli.translate import translate
from bridge.dialects.a2a import A2ALegacy, A2AStandard
from bridge.dialects.acp import FULL_CAPABILITY, AcpLegacy, AcpStandard, session_of, update_kind
from bridge.dialects.mcp import McpLegacy, McpStandard
from bridge.model import ORIGINAL_KEY, SYNTHESIZED_KEY, ReminderError

#: Harn's `session/remind` allow-list (research/harn.md §2.1.1) plus the envelope keys it strips first.
HARN_REMIND_KEYS = {"_meta", "body", "dedupe_key", "fired_at_turn", "id", "preserve_on_compact", "propagate",
                    "role_hint", "authority", "source", "tags", "ttl_turns", "sessionId", "mode"}

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


# ============================================================================= ACP


class TestAcpInject:
    def test_standard_decode_default_mode_is_finish_step(self):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "b"})
        assert r.mode == "finish_step"

    def test_standard_encode_exact(self):
        params = {"sessionId": "s-1", **FULL_STANDARD, "mode": "interrupt_immediate", "source": "host"}
        r = AcpStandard.decode_inject(params)
        assert AcpStandard.encode_inject("s-1", r) == params

    def test_standard_to_legacy_snake_case_and_explicit_mode(self):
        r = AcpStandard.decode_inject({"sessionId": "s-1", **FULL_STANDARD})
        out = AcpLegacy.encode_inject("s-1", r)
        assert out == {"sessionId": "s-1", "id": "rem-1", "body": FULL_STANDARD["body"], "tags": ["upstream", "rebase"],
                       "dedupe_key": "upstream:pr-1", "ttl_turns": 2, "preserve_on_compact": True, "propagate": "none",
                       "role_hint": "developer", "fired_at_turn": 3, "mode": "finish_step"}

    def test_legacy_always_writes_mode_even_for_a_minimal_reminder(self):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "b"})
        assert "mode" not in r.model_fields_set
        assert AcpLegacy.encode_inject("s", r)["mode"] == "finish_step"

    def test_legacy_keys_are_all_on_harns_allow_list(self):
        """Harn refuses any other key (HARN-RMD-001): everything else must ride in `_meta`."""
        r = AcpStandard.decode_inject({"sessionId": "s", **FULL_STANDARD, "mode": "audit_only", "source": "provider",
                                       "providerId": "p", "originatingAgentId": "a", "authority": "advisory",
                                       "x-unknown": [1], "_meta": {"k": "v"}})
        out = AcpLegacy.encode_inject("s", r)
        assert set(out) <= HARN_REMIND_KEYS
        assert out["authority"] == "advisory"
        assert "source" not in out  # Harn takes `source` only as "bridge"
        assert out["_meta"] == {"k": "v", ORIGINAL_KEY: {"source": "provider", "providerId": "p",
                                                         "originatingAgentId": "a", "x-unknown": [1]}}
        back = AcpLegacy.decode_inject(out)
        assert (back.source, back.provider_id, back.originating_agent_id, back.extra) == (
            "provider", "p", "a", {"x-unknown": [1]})

    def test_host_source_is_written_as_bridge(self):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "b", "source": "host"})
        out = AcpLegacy.encode_inject("s", r)
        assert out["source"] == "bridge" and "_meta" not in out

    def test_legacy_decode_flat(self):
        r = AcpLegacy.decode_inject({"sessionId": "s", "body": "b", "tags": ["w"], "dedupe_key": "k", "ttl_turns": 2,
                                     "role_hint": "developer", "mode": "interrupt_immediate", "source": "bridge"})
        assert (r.tags, r.dedupe_key, r.ttl_turns, r.role_hint, r.mode, r.source) == (
            ["w"], "k", 2, "developer", "interrupt_immediate", "host")
        assert "sessionId" not in r.extra and "mode" not in r.extra

    def test_legacy_decode_nested_reminder_form(self):
        r = AcpLegacy.decode_inject({"sessionId": "s", "mode": "interrupt",
                                     "reminder": {"body": "nested", "dedupe_key": "k", "ttl_turns": 1}})
        assert (r.body, r.dedupe_key, r.ttl_turns, r.mode) == ("nested", "k", 1, "interrupt_immediate")
        with pytest.raises(ReminderError, match=r"`params\.reminder\.body` is required"):
            AcpLegacy.decode_inject({"sessionId": "s", "mode": "steer", "reminder": {"dedupe_key": "k"}})

    def test_legacy_missing_mode_is_audit_only_and_written_explicitly(self):
        r = AcpLegacy.decode_inject({"sessionId": "s", "body": "b"})
        assert r.mode == "audit_only"
        assert AcpStandard.encode_inject("s", r)["mode"] == "audit_only"
        assert AcpLegacy.encode_inject("s", r)["mode"] == "audit_only"

    def test_harn_alias_sent_on_a_standard_wire_is_normalised(self):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "b", "mode": "steer", "source": "in_pipeline"})
        assert AcpStandard.encode_inject("s", r) == {"sessionId": "s", "body": "b", "mode": "finish_step",
                                                     "source": "provider"}

    def test_session_of(self):
        assert session_of({"sessionId": "a"}) == "a"
        assert session_of({"session_id": "b"}) == "b"
        assert session_of({}) is None

    def test_inject_results(self):
        assert AcpStandard.inject_result("r", 2) == {"reminderId": "r", "dedupedCount": 2}
        assert AcpStandard.inject_result("r") == {"reminderId": "r"}
        assert AcpLegacy.inject_result("r", 2) == {"reminderId": "r"}  # Harn answers only the id

    def test_flow_legacy_to_standard_keeps_sessionid_and_meta(self):
        msg = {"jsonrpc": "2.0", "id": 3, "method": "session/remind",
               "params": {"sessionId": "s-9", "body": "b", "dedupe_key": "k", "mode": "queue",
                          "_meta": {"harn": {"origin": "fw"}}}}
        [(to, out)] = run("acp", "peer", "legacy", "standard", msg)
        assert to == "peer" and out["method"] == "session/inject_reminder" and out["id"] == 3
        assert out["params"]["sessionId"] == "s-9" and out["params"]["dedupeKey"] == "k"
        assert out["params"]["mode"] == "audit_only"
        assert out["params"]["_meta"] == {"harn": {"origin": "fw"}, ORIGINAL_KEY: {"mode": "queue"}}


class TestAcpEmitted:
    HARN_PAYLOAD = {"reminderId": "reminder-1", "tags": ["token_pressure"], "body": "Refresh context.",
                    "roleHint": "developer", "renderedRole": "developer", "source": "stdlib_provider", "ttlTurns": 2,
                    "authority": "contract"}

    def harn_update(self, payload=None):
        return {"sessionUpdate": "reminder_emitted", "_meta": {"harn": {"reminder": payload or dict(self.HARN_PAYLOAD)}}}

    def test_legacy_decode(self):
        r = AcpLegacy.decode_emitted(self.harn_update())
        assert (r.id, r.tags, r.body, r.role_hint, r.source, r.ttl_turns, r.authority) == (
            "reminder-1", ["token_pressure"], "Refresh context.", "developer", "provider", 2, "contract")
        assert r.extra == {"renderedRole": "developer"}

    def test_legacy_to_standard(self):
        r = AcpLegacy.decode_emitted(self.harn_update())
        msg = AcpStandard.encode_emitted("session-1", r)
        assert msg["method"] == "session/update" and msg["params"]["sessionId"] == "session-1"
        update = msg["params"]["update"]
        assert {k: update[k] for k in ("sessionUpdate", "reminderId", "body", "tags", "source")} == {
            "sessionUpdate": "reminder_emitted", "reminderId": "reminder-1", "body": "Refresh context.",
            "tags": ["token_pressure"], "source": "provider"}
        assert update["_meta"][ORIGINAL_KEY] == {"ttlTurns": 2, "roleHint": "developer", "authority": "contract",
                                                 "renderedRole": "developer"}
        assert update_kind(msg) == "reminder_emitted"

    def test_standard_to_legacy_always_has_required_payload_keys(self):
        update = {"sessionUpdate": "reminder_emitted", "reminderId": "r-5", "body": "b", "source": "host"}
        r = AcpStandard.decode_emitted(update)
        msg = AcpLegacy.encode_emitted("s", r)
        update_out = msg["params"]["update"]
        assert update_out["sessionUpdate"] == "reminder_emitted"
        assert set(update_out) == {"sessionUpdate", "_meta"}
        payload = update_out["_meta"]["harn"]["reminder"]
        assert payload == {"reminderId": "r-5", "body": "b", "tags": [], "ttlTurns": None, "roleHint": "system",
                           "source": "bridge", "renderedRole": "system"}

    @pytest.mark.parametrize("role, rendered", [("system", "system"), ("developer", "developer"),
                                                ("user_block", "user"), ("ephemeral_cache", "ephemeral_cache")])
    def test_rendered_role(self, role, rendered):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "b", "roleHint": role})
        assert AcpLegacy.encode_emitted("s", r)["params"]["update"]["_meta"]["harn"]["reminder"]["renderedRole"] == rendered

    def test_standard_emitted_always_names_a_source(self):
        r = AcpStandard.decode_inject({"sessionId": "s", "body": "held by the proxy"})
        assert AcpStandard.encode_emitted("s", r)["params"]["update"]["source"] == "host"

    def test_standard_roundtrip(self):
        update = {"sessionUpdate": "reminder_emitted", "reminderId": "r", "body": "b", "tags": ["t"],
                  "dedupeKey": "k", "source": "hook", "providerId": "p", "firedAtTurn": 4, "_meta": {"x": 1}}
        r = AcpStandard.decode_emitted(update)
        assert AcpStandard.encode_emitted("s", r)["params"]["update"] == update

    def test_legacy_roundtrip_through_standard(self):
        r = AcpLegacy.decode_emitted(self.harn_update())
        via = AcpStandard.decode_emitted(AcpStandard.encode_emitted("s", r)["params"]["update"])
        assert AcpLegacy.encode_emitted("s", via)["params"]["update"] == self.harn_update()

    def test_legacy_null_ttl(self):
        payload = {**self.HARN_PAYLOAD, "ttlTurns": None}
        r = AcpLegacy.decode_emitted(self.harn_update(payload))
        assert r.ttl_turns is None
        assert AcpLegacy.encode_emitted("s", r)["params"]["update"]["_meta"]["harn"]["reminder"]["ttlTurns"] is None

    def test_deduped_encoder(self):
        assert AcpStandard.encode_deduped("s", "r-2", "k", ["r-1"], synthesized=False) == {
            "jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
                "sessionUpdate": "reminder_deduped", "reminderId": "r-2", "dedupeKey": "k",
                "droppedReminderIds": ["r-1"]}}}
        synth = AcpStandard.encode_deduped("s", "r-2", "k", ["r-1"], synthesized=True)
        assert synth["params"]["update"]["_meta"] == {SYNTHESIZED_KEY: True}

    def test_expired_encoder(self):
        assert AcpStandard.encode_expired("s", "r", "ttl_expired", 4, synthesized=True) == {
            "jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
                "sessionUpdate": "reminder_expired", "reminderId": "r", "phase": "ttl_expired", "expiredAtTurn": 4,
                "_meta": {SYNTHESIZED_KEY: True}}}}
        plain = AcpStandard.encode_expired("s", "r", "cleared", None, synthesized=False)["params"]["update"]
        assert plain == {"sessionUpdate": "reminder_expired", "reminderId": "r", "phase": "cleared"}

    def test_update_kind(self):
        assert update_kind({"method": "session/update", "params": {"update": {"sessionUpdate": "plan"}}}) == "plan"
        assert update_kind({"method": "session/prompt", "params": {"update": {"sessionUpdate": "plan"}}}) is None
        assert update_kind({"method": "session/update", "params": {"update": "x"}}) is None


class TestAcpCapability:
    def test_standard_read_write(self):
        caps = {"loadSession": True, "reminders": {"inject": True, "emit": False}}
        assert AcpStandard.read_capability(caps) == {"inject": True, "emit": False}
        AcpStandard.write_capability(caps, None)
        assert caps == {"loadSession": True}
        AcpStandard.write_capability(caps, FULL_CAPABILITY)
        assert caps["reminders"] == FULL_CAPABILITY
        assert AcpStandard.client_declares({"reminders": {}}) and not AcpStandard.client_declares({"_meta": {}})

    def test_legacy_read_means_everything(self):
        caps = {"_meta": {"harn": {"sessionUpdateExtensions": ["tool_lifecycle", "reminder_emitted"]}}}
        assert AcpLegacy.read_capability(caps) == {
            "inject": True, "emit": True, "propagate": ["all", "session", "none"],
            "roleHints": ["system", "developer", "user_block", "ephemeral_cache"]}
        assert AcpLegacy.read_capability({"_meta": {"harn": {"sessionUpdateExtensions": ["tool_lifecycle"]}}}) is None
        assert AcpLegacy.read_capability({}) is None

    def test_legacy_write_keeps_other_harn_keys(self):
        caps = {"loadSession": True, "_meta": {"harn": {"extensionContract": "v1",
                                                        "sessionUpdateExtensions": ["tool_lifecycle"]}}}
        AcpLegacy.write_capability(caps, {"inject": True, "emit": True})
        assert caps == {"loadSession": True, "_meta": {"harn": {
            "extensionContract": "v1", "sessionUpdateExtensions": ["tool_lifecycle", "reminder_emitted"]}}}
        AcpLegacy.write_capability(caps, {"inject": True, "emit": True})  # idempotent
        assert caps["_meta"]["harn"]["sessionUpdateExtensions"] == ["tool_lifecycle", "reminder_emitted"]
        AcpLegacy.write_capability(caps, None)
        assert caps["_meta"]["harn"]["sessionUpdateExtensions"] == ["tool_lifecycle"]

    def test_legacy_write_from_nothing(self):
        caps = {"loadSession": True}
        AcpLegacy.write_capability(caps, {"inject": True, "emit": True})
        assert caps == {"loadSession": True, "_meta": {"harn": {"sessionUpdateExtensions": ["reminder_emitted"]}}}

    def test_legacy_write_without_emit_leaves_no_husk(self):
        caps = {"loadSession": True}
        AcpLegacy.write_capability(caps, {"inject": True, "emit": False})
        assert caps == {"loadSession": True}
        AcpLegacy.write_capability(caps, None)
        assert caps == {"loadSession": True}

    def test_client_declares_legacy(self):
        assert AcpLegacy.client_declares({"_meta": {"harn": {}}})
        assert not AcpLegacy.client_declares({"fs": {}})


# ============================================================================= A2A


A2A_STANDARD = {"id": "rem-1", "body": "b", "tags": ["t"], "dedupeKey": "k", "ttlTurns": 2, "preserveOnCompact": True,
                "propagate": "REMINDER_PROPAGATION_NONE", "roleHint": "REMINDER_ROLE_HINT_DEVELOPER"}


class TestA2AStandard:
    def test_decode_inject_enum_names(self):
        task, r = A2AStandard.decode_inject({"taskId": "task-9", "reminder": dict(A2A_STANDARD)})
        assert task == "task-9"
        assert (r.propagate, r.role_hint, r.ttl_turns) == ("none", "developer", 2)

    def test_encode_inject_exact(self):
        _, r = A2AStandard.decode_inject({"taskId": "task-9", "reminder": dict(A2A_STANDARD)})
        assert A2AStandard.encode_inject("task-9", r) == {"taskId": "task-9", "reminder": A2A_STANDARD}

    @pytest.mark.parametrize("wire, canonical", [("REMINDER_PROPAGATION_UNSPECIFIED", "session"),
                                                 ("REMINDER_PROPAGATION_SESSION", "session")])
    def test_propagation_names(self, wire, canonical):
        _, r = A2AStandard.decode_inject({"taskId": "t", "reminder": {"body": "b", "propagate": wire}})
        assert r.propagate == canonical

    @pytest.mark.parametrize("params, message", [
        ({"reminder": {"body": "b"}}, "invalid reminder: `params.taskId` is required (a non-empty string)"),
        ({"taskId": "", "reminder": {"body": "b"}}, "invalid reminder: `params.taskId` is required (a non-empty string)"),
        ({"taskId": "t"}, "invalid reminder: `params.reminder` must be an object"),
        ({"taskId": "t", "reminder": {"body": ""}},
         'invalid reminder: `params.reminder.body` must be a non-empty string after trimming (got "")'),
        ({"taskId": "t", "reminder": {"body": "b", "propagate": "REMINDER_PROPAGATION_ALL"}},
         'invalid reminder: `params.reminder.propagate` must be one of all, session, none '
         '(got "REMINDER_PROPAGATION_ALL")'),
        ("x", "invalid reminder: `params` must be an object"),
    ])
    def test_decode_inject_errors(self, params, message):
        with pytest.raises(ReminderError) as info:
            A2AStandard.decode_inject(params)
        assert str(info.value) == message

    def test_lower_case_values_are_read_but_never_written(self):
        _, r = A2AStandard.decode_inject({"taskId": "t", "reminder": {"id": "r", "body": "b", "propagate": "none",
                                                                      "roleHint": "developer"}})
        assert A2AStandard.encode_inject("t", r)["reminder"] == {
            "id": "r", "body": "b", "propagate": "REMINDER_PROPAGATION_NONE", "roleHint": "REMINDER_ROLE_HINT_DEVELOPER"}

    def test_inject_result(self):
        result = A2AStandard.inject_result("rem-1", 1, 1_767_225_600.25)
        assert result["reminderId"] == "rem-1" and result["dedupedCount"] == 1
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", result["acceptedAt"])
        assert result["acceptedAt"] == "2026-01-01T00:00:00.250Z"  # the flow's clock, not the codec's

    def test_update_frame(self):
        _, r = A2AStandard.decode_inject({"taskId": "t", "reminder": dict(A2A_STANDARD)})
        frame = A2AStandard.encode_update("task-9", "ctx-1", r)
        assert frame == {"reminderUpdate": {"taskId": "task-9", "contextId": "ctx-1", "reminder": A2A_STANDARD}}
        update, back = A2AStandard.decode_update(frame)
        assert update["taskId"] == "task-9" and back == r
        assert A2AStandard.encode_update("t", "c", r, "deduped")["reminderUpdate"]["reason"] == "REMINDER_DEDUPED"
        assert A2AStandard.encode_update("t", "c", r, "expired")["reminderUpdate"]["reason"] == "REMINDER_EXPIRED"

    def test_card_capability_enum_names(self):
        caps = {"streaming": True}
        A2AStandard.write_capability(caps, {"inject": True, "emit": True, "propagate": ["session", "none"],
                                            "roleHints": ["system", "developer"]})
        assert caps["reminders"] == {"inject": True, "emit": True,
                                     "propagate": ["REMINDER_PROPAGATION_SESSION", "REMINDER_PROPAGATION_NONE"],
                                     "roleHints": ["REMINDER_ROLE_HINT_SYSTEM", "REMINDER_ROLE_HINT_DEVELOPER"]}
        assert A2AStandard.read_capability(caps) == {"inject": True, "emit": True, "propagate": ["session", "none"],
                                                     "roleHints": ["system", "developer"]}
        A2AStandard.write_capability(caps, None)
        assert caps == {"streaming": True}

    def test_card_capability_full_set_collapses_to_what_a2a_can_say(self):
        caps: dict = {}
        A2AStandard.write_capability(caps, FULL_CAPABILITY)
        assert caps["reminders"]["propagate"] == ["REMINDER_PROPAGATION_SESSION", "REMINDER_PROPAGATION_NONE"]
        assert caps["reminders"]["roleHints"] == ["REMINDER_ROLE_HINT_SYSTEM", "REMINDER_ROLE_HINT_DEVELOPER"]

    def test_card_legacy_capability(self):
        cap = {"inject": True, "emit": True, "propagate": ["session"], "roleHints": ["system"]}
        caps = {"streaming": True, "_meta": {"harn": {"reminders": cap}}}
        assert A2ALegacy.read_capability(caps) == cap
        A2ALegacy.write_capability(caps, None)
        assert caps == {"streaming": True}
        A2ALegacy.write_capability(caps, cap)
        assert caps == {"streaming": True, "_meta": {"harn": {"reminders": cap}}}


class TestA2ALossy:
    @pytest.mark.parametrize("field, value, wire", [
        ("propagate", "all", "REMINDER_PROPAGATION_SESSION"),
        ("roleHint", "user_block", "REMINDER_ROLE_HINT_DEVELOPER"),
        ("roleHint", "ephemeral_cache", "REMINDER_ROLE_HINT_SYSTEM"),
    ])
    def test_lossy_value_kept_under_metadata(self, field, value, wire):
        params = {"metadata": {"harn": {"reminder": {"id": "r", "body": "b", field: value}}}}
        [r] = A2ALegacy.take_from_params(params)
        out = A2AStandard.encode_inject("t", r)["reminder"]
        assert out[field] == wire
        assert out["metadata"] == {ORIGINAL_KEY: {field: value}}
        _, back = A2AStandard.decode_inject({"taskId": "t", "reminder": out})
        holder: dict = {}
        A2ALegacy.put_on_params(holder, [back])
        assert holder == {"metadata": {"harn": {"reminder": {"id": "r", "body": "b", field: value}}}}

    def test_authority_rides_in_metadata(self):
        [r] = A2ALegacy.take_from_params({"metadata": {"harn": {"reminder": {"body": "b", "authority": "advisory"}}}})
        out = A2AStandard.encode_inject("t", r)["reminder"]
        assert "authority" not in out
        assert out["metadata"][ORIGINAL_KEY] == {"authority": "advisory"}
        assert A2AStandard.decode_inject({"taskId": "t", "reminder": out})[1].authority == "advisory"

    def test_lossy_through_the_flow(self):
        msg = {"jsonrpc": "2.0", "id": "q", "method": "SendMessage", "params": {
            "message": {"messageId": "m", "taskId": "task-1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
            "metadata": {"harn": {"reminder": {"id": "r", "body": "b", "propagate": "all"}}}}}
        sends = run("a2a", "peer", "legacy", "standard", msg)
        assert [m.get("method") for _, m in sends] == ["InjectTaskReminder", "SendMessage"]
        reminder = sends[0][1]["params"]["reminder"]
        assert reminder["propagate"] == "REMINDER_PROPAGATION_SESSION"
        assert reminder["metadata"] == {ORIGINAL_KEY: {"propagate": "all"}}
        assert "metadata" not in sends[1][1]["params"]


class TestA2ALegacy:
    def test_take_from_params_and_message(self):
        params = {"message": {"messageId": "m", "metadata": {"harn": {"reminder": {"body": "on message"}},
                                                             "keep": 1}},
                  "metadata": {"harn": {"reminder": {"body": "on params"}, "origin": "x"}}}
        found = A2ALegacy.take_from_params(params)
        assert [r.body for r in found] == ["on params", "on message"]
        assert params == {"message": {"messageId": "m", "metadata": {"keep": 1}},
                          "metadata": {"harn": {"origin": "x"}}}

    def test_take_prunes_emptied_maps(self):
        params = {"message": {"messageId": "m"}, "metadata": {"harn": {"reminder": {"body": "b"}}}}
        A2ALegacy.take_from_params(params)
        assert params == {"message": {"messageId": "m"}}

    def test_reminders_list_form(self):
        params = {"metadata": {"harn": {"reminders": [{"id": "a", "body": "one"}, {"id": "b", "body": "two"}]}}}
        found = A2ALegacy.take_from_params(params)
        assert [(r.id, r.body) for r in found] == [("a", "one"), ("b", "two")]
        assert params == {}
        A2ALegacy.put_on_params(params, found)
        assert params == {"metadata": {"harn": {"reminders": [{"id": "a", "body": "one"}, {"id": "b", "body": "two"}]}}}

    def test_put_single(self):
        [r] = A2ALegacy.take_from_params({"metadata": {"harn": {"reminder": {"id": "a", "body": "one"}}}})
        params = {"message": {"messageId": "m"}, "metadata": {"other": True}}
        A2ALegacy.put_on_params(params, [r])
        assert params == {"message": {"messageId": "m"},
                          "metadata": {"other": True, "harn": {"reminder": {"id": "a", "body": "one"}}}}

    def test_put_on_null_metadata(self):
        [r] = A2ALegacy.take_from_params({"metadata": {"harn": {"reminder": {"id": "a", "body": "one"}}}})
        params = {"message": {"messageId": "m", "metadata": None}}
        A2ALegacy.put_on_params(params["message"], [r])
        assert params["message"]["metadata"] == {"harn": {"reminder": {"id": "a", "body": "one"}}}

    def test_errors_name_the_slot(self):
        with pytest.raises(ReminderError) as info:
            A2ALegacy.take_from_params({"metadata": {"harn": {"reminders": {"body": "b"}}}})
        assert str(info.value) == "invalid reminder: `params.metadata.harn.reminders` must be a list of reminder objects"
        with pytest.raises(ReminderError) as info:
            A2ALegacy.take_from_params({"message": {"metadata": {"harn": {"reminders": [{"body": "ok"}, {"body": 1}]}}}})
        assert str(info.value) == "invalid reminder: `params.message.metadata.harn.reminders[1].body` must be a string (got 1)"
        with pytest.raises(ReminderError) as info:
            A2ALegacy.take_from_params({"metadata": {"harn": {"reminder": "text"}}})
        assert str(info.value) == "invalid reminder: `params.metadata.harn.reminder` must be an object"

    @pytest.mark.parametrize("kind, id_key", [("task", "id"), ("statusUpdate", "taskId"), ("artifactUpdate", "taskId"),
                                              ("message", "taskId")])
    def test_each_event_kind(self, kind, id_key):
        event = {id_key: "task-9", "contextId": "ctx-1", "metadata": {"harn": {"reminder": {"id": "r", "body": "b"}}}}
        result = {kind: copy.deepcopy(event)}
        task_id, context_id, found = A2ALegacy.take_from_event(result)
        assert (task_id, context_id, [r.body for r in found]) == ("task-9", "ctx-1", ["b"])
        assert result == {kind: {id_key: "task-9", "contextId": "ctx-1"}}
        assert A2ALegacy.put_on_event(result, found)
        assert result == {kind: event}

    def test_event_without_reminders(self):
        result = {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}
        assert A2ALegacy.take_from_event(result) == ("t", None, [])
        assert A2ALegacy.take_from_event({"unknownKind": {}}) == (None, None, [])
        assert A2ALegacy.take_from_event("x") == (None, None, [])
        assert not A2ALegacy.put_on_event({"other": {}}, [])

    @pytest.mark.parametrize("kind", ["task", "statusUpdate", "artifactUpdate", "message"])
    def test_event_kinds_through_the_flow(self, kind):
        id_key = "id" if kind == "task" else "taskId"
        frame = {"jsonrpc": "2.0", "id": 4, "result": {kind: {
            id_key: "task-9", "contextId": "ctx-1", "metadata": {"harn": {"reminder": {"id": "r", "body": "b"}}}}}}
        sends = run("a2a", "host", "legacy", "standard", frame)
        assert len(sends) == 2 and all(to == "host" for to, _ in sends)
        assert sends[0][1] == {"jsonrpc": "2.0", "id": 4, "result": {"reminderUpdate": {
            "taskId": "task-9", "contextId": "ctx-1", "reminder": {"id": "r", "body": "b"}}}}
        assert sends[1][1] == {"jsonrpc": "2.0", "id": 4, "result": {kind: {id_key: "task-9", "contextId": "ctx-1"}}}


def test_an_unknown_field_named_like_another_dialects_id_never_lands_inline():
    """`reminderId` is Harn's id on ACP updates: a stray one on an MCP reminder (a fuzz find) must
    not be written where a Harn reader takes it for the id; it rides in the proxy's own `_meta`
    key and comes back on the way home."""
    from bridge.dialects.mcp import HARN_SHAPE, SPEC_SHAPE

    decoded = SPEC_SHAPE.decode({"id": "r1", "body": "x", "reminderId": None})
    legacy = HARN_SHAPE.encode(decoded)
    assert "reminderId" not in legacy and legacy["_meta"]["reminder-bridge/original"] == {"reminderId": None}
    assert HARN_SHAPE.decode(legacy).extra == {"reminderId": None}
