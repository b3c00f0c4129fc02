"""The ACP codecs (`AcpStandard`, `AcpLegacy`): inject and emitted updates decode and encode to the
exact wire of spec §4, and the capability each dialect declares."""
from __future__ import annotations

import pytest

from bridge.dialects.acp import FULL_CAPABILITY, AcpLegacy, AcpStandard, session_of, update_kind
from bridge.model import ORIGINAL_KEY, SYNTHESIZED_KEY, ReminderError
from tests.unit.dialects.test_mcp import FULL_STANDARD, run

#: Harn's `session/remind` allow-list (research/harn.md §2.1.1) plus the envelope keys it strips first.
HARN_REMIND_KEYS = {"_meta", "body", "dedupe_key", "fired_at_turn", "id", "preserve_on_compact", "propagate",
                    "role_hint", "authority", "source", "tags", "ttl_turns", "sessionId", "mode"}


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
