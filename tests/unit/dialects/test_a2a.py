"""The A2A codecs (`A2AStandard`, `A2ALegacy`): every message kind decodes and encodes to the exact
wire of spec §5, lossy values included."""
from __future__ import annotations

import copy
import re

import pytest

from bridge.dialects.a2a import A2ALegacy, A2AStandard
from bridge.dialects.acp import FULL_CAPABILITY
from bridge.model import ORIGINAL_KEY, ReminderError
from tests.unit.dialects.test_mcp import run

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
