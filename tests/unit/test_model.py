"""spec §2, the canonical reminder: every validation rule, with the exact message a user sees.

Everything is decoded through the real codecs (the way the proxy reads a wire), never by
building the pydantic model directly, so the field names in the messages are the ones the
sender spelled.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from bridge.cli.translate import translate
from bridge.dialects.acp import AcpLegacy, AcpStandard
from bridge.dialects.mcp import McpLegacy, McpStandard
from bridge.model import ORIGINAL_KEY, ReminderError, uuid7


# ----------------------------------------------------------------------------- decoders


def acp_std(**fields):
    """A standard `session/inject_reminder` params object (flat camelCase)."""
    return AcpStandard.decode_inject({"sessionId": "s-1", "body": "b", **fields})


def acp_harn(**fields):
    """Harn's `session/remind` params (flat snake_case)."""
    return AcpLegacy.decode_inject({"sessionId": "s-1", "body": "b", "mode": "finish_step", **fields})


def mcp_harn_msg(reminder, flat: bool = False):
    meta = {"harn.reminder": reminder} if flat else {"harn": {"reminder": reminder}}
    return {"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": "harn.reminder", "data": "x", "_meta": meta}}


def mcp_harn(**fields):
    return McpLegacy.decode(mcp_harn_msg({"body": "b", **fields}))


def mcp_std(**fields):
    return McpStandard.decode({"jsonrpc": "2.0", "method": "notifications/reminder",
                               "params": {"reminder": {"id": "r-1", "body": "b", **fields}}})


def error(decode, **fields) -> str:
    with pytest.raises(ReminderError) as info:
        decode(**fields)
    return str(info.value)


# ----------------------------------------------------------------------------- body


@pytest.mark.parametrize("body, expected", [
    ("", 'invalid reminder: `params.body` must be a non-empty string after trimming (got "")'),
    ("  \t\n", 'invalid reminder: `params.body` must be a non-empty string after trimming (got "  \\t\\n")'),
    (3, "invalid reminder: `params.body` must be a string (got 3)"),
    (None, "invalid reminder: `params.body` must be a string (got null)"),
    (["a"], 'invalid reminder: `params.body` must be a string (got ["a"])'),
])
def test_body_rules_standard_acp(body, expected):
    assert error(acp_std, body=body) == expected


def test_body_missing_is_required_in_every_dialect():
    with pytest.raises(ReminderError, match=r"^invalid reminder: `params\.body` is required$"):
        AcpStandard.decode_inject({"sessionId": "s-1"})
    with pytest.raises(ReminderError, match=r"^invalid reminder: `params\.body` is required$"):
        AcpLegacy.decode_inject({"sessionId": "s-1", "mode": "finish_step"})
    with pytest.raises(ReminderError, match=r"^invalid reminder: `params\._meta\.harn\.reminder\.body` is required$"):
        McpLegacy.decode(mcp_harn_msg({"id": "r-1"}))
    with pytest.raises(ReminderError, match=r"^invalid reminder: `params\.reminder\.body` is required$"):
        McpStandard.decode({"method": "notifications/reminder", "params": {"reminder": {"id": "r"}}})


def test_blank_body_named_where_it_sits_on_each_wire():
    assert error(mcp_harn, body=" ") == (
        'invalid reminder: `params._meta.harn.reminder.body` must be a non-empty string after trimming (got " ")')
    assert error(mcp_std, body="") == (
        'invalid reminder: `params.reminder.body` must be a non-empty string after trimming (got "")')
    assert error(acp_harn, body="") == (
        'invalid reminder: `params.body` must be a non-empty string after trimming (got "")')


def test_error_carries_field_and_rule():
    with pytest.raises(ReminderError) as info:
        acp_std(ttlTurns=0)
    assert info.value.field == "params.ttlTurns"
    assert info.value.rule == "must be an integer >= 1 (got 0)"
    assert isinstance(info.value, ValueError)


def test_reminder_not_an_object():
    with pytest.raises(ReminderError) as info:
        McpStandard.decode({"method": "notifications/reminder", "params": {"reminder": "hello"}})
    assert str(info.value) == "invalid reminder: `params.reminder` must be an object"
    with pytest.raises(ReminderError) as info:
        AcpStandard.decode_inject(["body"])
    assert str(info.value) == "invalid reminder: `params` must be an object"


# ----------------------------------------------------------------------------- ttlTurns / firedAtTurn


@pytest.mark.parametrize("value, shown", [(0, "0"), (-1, "-1"), (2.0, "2.0"), ("2", '"2"'), (True, "true"),
                                          (1.5, "1.5"), ([1], "[1]")])
def test_ttl_turns_must_be_an_integer_at_least_one(value, shown):
    assert error(acp_std, ttlTurns=value) == f"invalid reminder: `params.ttlTurns` must be an integer >= 1 (got {shown})"
    assert error(acp_harn, ttl_turns=value) == (
        f"invalid reminder: `params.ttl_turns` must be an integer >= 1 (got {shown})")
    assert error(mcp_harn, ttlTurns=value) == (
        f"invalid reminder: `params._meta.harn.reminder.ttlTurns` must be an integer >= 1 (got {shown})")


@pytest.mark.parametrize("value", [1, 2, 1000])
def test_ttl_turns_valid(value):
    assert acp_std(ttlTurns=value).ttl_turns == value
    assert acp_harn(ttl_turns=value).ttl_turns == value


def test_ttl_turns_null_means_no_ttl():
    """Harn takes `ttl_turns: null` (and emits `ttlTurns: null`); it means "until cleared"."""
    r = acp_harn(ttl_turns=None)
    assert r.ttl_turns is None
    assert "ttlTurns" not in McpStandard.encode(r)["params"]["reminder"]  # the standard schema forbids null


@pytest.mark.parametrize("value, shown", [(-1, "-1"), (1.5, "1.5"), (2.0, "2.0"), ("3", '"3"'), (True, "true")])
def test_fired_at_turn_must_be_a_non_negative_integer_or_null(value, shown):
    assert error(acp_std, firedAtTurn=value) == (
        f"invalid reminder: `params.firedAtTurn` must be an integer >= 0 or null (got {shown})")
    assert error(acp_harn, fired_at_turn=value) == (
        f"invalid reminder: `params.fired_at_turn` must be an integer >= 0 or null (got {shown})")


@pytest.mark.parametrize("value", [None, 0, 7])
def test_fired_at_turn_valid(value):
    assert acp_std(firedAtTurn=value).fired_at_turn == value
    assert mcp_std(firedAtTurn=value).fired_at_turn == value


# ----------------------------------------------------------------------------- tags


@pytest.mark.parametrize("tags, expected", [
    ("a", 'invalid reminder: `params.tags` must be a list of strings (got "a")'),
    ({"a": 1}, 'invalid reminder: `params.tags` must be a list of strings (got {"a": 1})'),
    (["a", " "], 'invalid reminder: `params.tags` must not contain empty entries (got ["a", " "])'),
    (["", "a"], 'invalid reminder: `params.tags` must not contain empty entries (got ["", "a"])'),
    (["a", 3], "invalid reminder: `params.tags[1]` must be a string (got 3)"),
])
def test_tags_rules(tags, expected):
    assert error(acp_std, tags=tags) == expected


def test_tags_are_trimmed_and_deduplicated_in_order():
    assert acp_std(tags=[" b", "a ", "b", "  a  ", "c"]).tags == ["b", "a", "c"]
    assert mcp_harn(tags=["x", "x"]).tags == ["x"]


def test_tags_absent_or_null_is_empty():
    assert acp_std().tags == []
    assert acp_harn(tags=None).tags == []  # Harn: "null or a list"


def test_tags_error_names_entry_in_legacy_spelling():
    assert error(mcp_harn, tags=["ok", None]) == (
        "invalid reminder: `params._meta.harn.reminder.tags[1]` must be a string (got null)")


# ----------------------------------------------------------------------------- booleans and enums


@pytest.mark.parametrize("value, shown", [("yes", '"yes"'), (1, "1"), (0, "0"), (None, "null"), ("true", '"true"')])
def test_preserve_on_compact_must_be_boolean(value, shown):
    assert error(acp_std, preserveOnCompact=value) == (
        f"invalid reminder: `params.preserveOnCompact` must be a boolean (got {shown})")
    assert error(acp_harn, preserve_on_compact=value) == (
        f"invalid reminder: `params.preserve_on_compact` must be a boolean (got {shown})")


@pytest.mark.parametrize("decode, key, allowed", [
    (acp_std, "propagate", "all, session, none"),
    (acp_std, "roleHint", "system, developer, user_block, ephemeral_cache"),
    (acp_harn, "role_hint", "system, developer, user_block, ephemeral_cache"),
    (acp_std, "mode", "interrupt_immediate, finish_step, audit_only"),
    (acp_std, "authority", "contract, corrective, advisory"),
    (acp_harn, "authority", "contract, corrective, advisory"),
    (acp_harn, "propagate", "all, session, none"),
])
def test_bad_enum_lists_allowed_values(decode, key, allowed):
    assert error(decode, **{key: "everyone"}) == (
        f'invalid reminder: `params.{key}` must be one of {allowed} (got "everyone")')


def test_bad_enum_not_a_string():
    assert error(acp_std, propagate=3) == "invalid reminder: `params.propagate` must be one of all, session, none (got 3)"


def test_a2a_enum_name_is_not_accepted_on_acp():
    assert error(acp_std, propagate="REMINDER_PROPAGATION_SESSION").startswith(
        "invalid reminder: `params.propagate` must be one of all, session, none")


@pytest.mark.parametrize("field, value", [("propagate", "all"), ("propagate", "none"), ("roleHint", "developer"),
                                          ("roleHint", "user_block"), ("roleHint", "ephemeral_cache"),
                                          ("mode", "interrupt_immediate"), ("mode", "audit_only"),
                                          ("authority", "corrective")])
def test_valid_enum_values(field, value):
    attr = {"roleHint": "role_hint"}.get(field, field)
    assert getattr(acp_std(**{field: value}), attr) == value


def test_defaults():
    r = acp_std()
    assert (r.tags, r.dedupe_key, r.ttl_turns, r.preserve_on_compact, r.propagate, r.role_hint, r.fired_at_turn,
            r.mode) == ([], None, None, False, "session", "system", None, "finish_step")


def test_legacy_unknown_or_missing_mode_is_audit_only():
    """Harn treats a missing or unknown mode as audit_only: the proxy keeps that meaning, never refuses."""
    assert AcpLegacy.decode_inject({"sessionId": "s", "body": "b"}).mode == "audit_only"
    request = {"jsonrpc": "2.0", "id": 1, "method": "session/remind",
               "params": {"sessionId": "s", "body": "b", "mode": "finsh_step"}}
    [standard] = translate("acp", "peer", "legacy", "standard", json.dumps(request).encode())
    assert json.loads(standard.data)["params"] == {"sessionId": "s", "body": "b", "mode": "audit_only"}
    # …and the proxy reads its own rewrite back (it once refused it with -32602)
    [legacy] = translate("acp", "peer", "standard", "legacy", standard.data)
    params = json.loads(legacy.data)["params"]
    assert json.loads(legacy.data)["method"] == "session/remind"
    assert {k: params[k] for k in ("sessionId", "body", "mode")} == {"sessionId": "s", "body": "b", "mode": "audit_only"}


# ----------------------------------------------------------------------------- _meta and unknown fields


@pytest.mark.parametrize("meta, shown", [(3, "3"), ("x", '"x"'), ([1], "[1]")])
def test_meta_must_be_an_object(meta, shown):
    assert error(acp_std, _meta=meta) == "invalid reminder: `params._meta` must be an object"
    assert error(mcp_std, _meta=meta) == "invalid reminder: `params.reminder._meta` must be an object"


def test_unknown_fields_and_meta_are_kept():
    r = acp_std(**{"x-vendor": {"deep": [1, 2]}, "priority": 5, "_meta": {"com.example/trace": "abc"}})
    assert r.extra == {"x-vendor": {"deep": [1, 2]}, "priority": 5}
    assert r.meta == {"com.example/trace": "abc"}
    # …and survive a rewrite to a wire that has no slot for them
    remind = AcpLegacy.encode_inject("s-1", r)
    assert remind["_meta"]["com.example/trace"] == "abc"
    assert remind["_meta"][ORIGINAL_KEY] == {"x-vendor": {"deep": [1, 2]}, "priority": 5}
    back = AcpLegacy.decode_inject(remind)
    assert back.extra == r.extra and back.meta == r.meta


def test_unknown_fields_inline_on_a_wire_that_takes_them():
    r = mcp_harn(color="blue")
    assert McpLegacy.encode(r)["params"]["_meta"]["harn"]["reminder"]["color"] == "blue"


# ----------------------------------------------------------------------------- id


def _is_uuid7(value: str) -> bool:
    u = uuid.UUID(value)
    return u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == value


@pytest.mark.parametrize("fields", [{}, {"id": ""}, {"id": "   "}, {"id": None}])
def test_missing_or_empty_id_gets_a_uuid7(fields):
    r = acp_std(**fields)
    assert _is_uuid7(r.id)
    assert uuid.UUID(r.id).hex[12] == "7"  # the version nibble


def test_generated_ids_carry_the_time_and_sort_by_creation():
    before = time.time_ns() // 1_000_000
    first = acp_harn().id
    second = mcp_harn().id  # no sleep: ids made in the same millisecond sort too
    after = time.time_ns() // 1_000_000
    assert first != second
    assert first < second  # string order = time order for UUIDv7
    for rid in (first, second):
        stamp = int(uuid.UUID(rid).hex[:12], 16)
        assert before <= stamp <= after


def test_uuid7_many_distinct():
    ids = {uuid7() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(_is_uuid7(i) for i in list(ids)[:50])


def test_uuid7_consecutive_ids_are_strictly_increasing_valid_and_unique():
    """RFC 9562 §6.2: ids made one after the other in a process sort in creation order, also
    within one millisecond (a counter), as strings and as integers."""
    before = time.time_ns() // 1_000_000
    ids = [uuid7() for _ in range(100_000)]
    after = time.time_ns() // 1_000_000
    out_of_order = sum(1 for a, b in zip(ids, ids[1:]) if not a < b)
    assert out_of_order == 0, f"{out_of_order} of {len(ids) - 1} consecutive pairs out of string order"
    ints = [uuid.UUID(i).int for i in ids]
    assert all(a < b for a, b in zip(ints, ints[1:]))
    assert len(set(ids)) == len(ids)
    for rid in ids:
        u = uuid.UUID(rid)
        assert u.version == 7 and u.int >> 62 & 0b11 == 0b10 and str(u) == rid
    # the timestamp field is the creation time, not run ahead by the counter
    stamps = [i >> 80 for i in ints]
    assert before <= stamps[0] and stamps[-1] <= after + 1


def test_uuid7_stays_monotonic_when_the_clock_goes_back(monkeypatch):
    import bridge.model as model

    now = [1_700_000_000_000_000_000]
    monkeypatch.setattr(model.time, "time_ns", lambda: now[0])
    first = model.uuid7()
    now[0] -= 5_000_000_000  # the wall clock steps back five seconds
    second = model.uuid7()
    now[0] += 10_000_000_000
    third = model.uuid7()
    assert first < second < third
    assert all(_is_uuid7(i) for i in (first, second, third))


def test_given_id_is_kept_and_trimmed():
    assert acp_std(id="rem-1").id == "rem-1"
    assert acp_harn(id="  rem-2 ").id == "rem-2"
    assert mcp_std(id="0190abcd-2024-7c1d-bb02-3a0e8a44d7f0").id == "0190abcd-2024-7c1d-bb02-3a0e8a44d7f0"


def test_id_must_be_a_string():
    assert error(acp_std, id=42) == "invalid reminder: `params.id` must be a string (got 42)"


def test_id_stable_across_every_rewrite():
    """A reminder that arrived without an id gets one once; every later rewrite keeps it."""
    legacy = mcp_harn_msg({"body": "rebase first"})
    [first] = translate("mcp", "host", "legacy", "standard", json.dumps(legacy).encode())
    rid = json.loads(first.data)["params"]["reminder"]["id"]
    assert _is_uuid7(rid)
    [second] = translate("mcp", "host", "standard", "legacy", first.data)
    assert json.loads(second.data)["params"]["_meta"]["harn"]["reminder"]["id"] == rid
    [third] = translate("mcp", "host", "legacy", "standard", second.data)
    assert json.loads(third.data)["params"]["reminder"]["id"] == rid


# ----------------------------------------------------------------------------- dedupeKey


def test_dedupe_key_trimmed_blank_absent():
    assert acp_std(dedupeKey="  k:1 ").dedupe_key == "k:1"
    blank = acp_std(dedupeKey="   ")
    assert blank.dedupe_key is None
    assert "dedupeKey" not in AcpStandard.encode_inject("s", blank)
    assert "dedupe_key" not in AcpLegacy.encode_inject("s", blank)
    assert acp_harn(dedupe_key="").dedupe_key is None


def test_dedupe_key_must_be_a_string():
    assert error(acp_harn, dedupe_key=5) == "invalid reminder: `params.dedupe_key` must be a string (got 5)"


# ----------------------------------------------------------------------------- aliases


@pytest.mark.parametrize("wire, canonical", [
    ("interrupt", "interrupt_immediate"), ("interrupt_immediate", "interrupt_immediate"),
    ("after_current_operation", "finish_step"), ("steer", "finish_step"), ("finish_step", "finish_step"),
    ("queue", "audit_only"), ("wait_for_completion", "audit_only"), ("audit_only", "audit_only"),
])
def test_harn_mode_aliases(wire, canonical):
    assert AcpLegacy.decode_inject({"sessionId": "s", "body": "b", "mode": wire}).mode == canonical
    assert mcp_harn(mode=wire).mode == canonical


@pytest.mark.parametrize("wire", ["interrupt", "steer", "after_current_operation", "queue", "wait_for_completion"])
def test_mode_alias_never_written_on_a_standard_wire_but_comes_back_to_harn(wire):
    r = AcpLegacy.decode_inject({"sessionId": "s", "body": "b", "mode": wire})
    standard = AcpStandard.encode_inject("s", r)
    assert standard["mode"] == r.mode  # the standard spelling
    assert standard["_meta"][ORIGINAL_KEY]["mode"] == wire
    assert AcpLegacy.encode_inject("s", AcpStandard.decode_inject(standard))["mode"] == wire


@pytest.mark.parametrize("wire, canonical", [
    ("stdlib_provider", "provider"), ("in_pipeline", "provider"), ("bridge", "host"), ("hook", "hook"),
    ("inherited", "inherited"),
])
def test_harn_source_aliases(wire, canonical):
    assert mcp_harn(source=wire).source == canonical


@pytest.mark.parametrize("canonical, harn", [("host", "bridge"), ("provider", "stdlib_provider"), ("hook", "hook"),
                                             ("inherited", "inherited")])
def test_source_reverse_mapping_toward_harn(canonical, harn):
    r = acp_std(source=canonical)
    assert McpLegacy.encode(r)["params"]["_meta"]["harn"]["reminder"]["source"] == harn
    emitted = AcpLegacy.encode_emitted("s", r)
    assert emitted["params"]["update"]["_meta"]["harn"]["reminder"]["source"] == harn


def test_standard_source_values_stay_standard():
    for value in ("host", "provider", "hook", "bridge", "inherited"):
        assert acp_std(source=value).source == value
        assert AcpStandard.encode_inject("s", acp_std(source=value))["source"] == value


def test_in_pipeline_is_provider_on_standard_and_comes_back():
    r = mcp_harn(source="in_pipeline")
    update = AcpStandard.encode_emitted("s", r)["params"]["update"]
    assert update["source"] == "provider"
    assert update["_meta"][ORIGINAL_KEY]["source"] == "in_pipeline"
    again = AcpStandard.decode_emitted(update)
    assert McpLegacy.encode(again)["params"]["_meta"]["harn"]["reminder"]["source"] == "in_pipeline"


def test_unknown_source_kept_verbatim():
    assert mcp_harn(source="coordinator-agent").source == "coordinator-agent"
    assert acp_std(source="coordinator-agent").source == "coordinator-agent"


# ----------------------------------------------------------------------------- casing


@pytest.mark.parametrize("camel, snake, value", [
    ("dedupeKey", "dedupe_key", "k"), ("ttlTurns", "ttl_turns", 3), ("preserveOnCompact", "preserve_on_compact", True),
    ("roleHint", "role_hint", "developer"), ("firedAtTurn", "fired_at_turn", 4),
    ("providerId", "provider_id", "p-1"), ("originatingAgentId", "originating_agent_id", "agent-7"),
])
def test_both_casings_accepted_everywhere(camel, snake, value):
    attr = snake
    for decode in (acp_std, acp_harn, mcp_harn):
        assert getattr(decode(**{camel: value}), attr) == value
        assert getattr(decode(**{snake: value}), attr) == value


@pytest.mark.parametrize("camel, snake, bad", [
    ("ttlTurns", "ttl_turns", 0), ("roleHint", "role_hint", "root"), ("preserveOnCompact", "preserve_on_compact", "y"),
    ("firedAtTurn", "fired_at_turn", -2), ("dedupeKey", "dedupe_key", 1),
])
def test_error_names_the_spelling_the_sender_used(camel, snake, bad):
    assert f"`params.{camel}`" in error(acp_std, **{camel: bad})
    assert f"`params.{snake}`" in error(acp_std, **{snake: bad})
    assert f"`params._meta.harn.reminder.{snake}`" in error(mcp_harn, **{snake: bad})
    assert f"`params._meta.harn.reminder.{camel}`" in error(mcp_harn, **{camel: bad})


def test_flat_harn_key_error_names_it():
    with pytest.raises(ReminderError) as info:
        McpLegacy.decode(mcp_harn_msg({"body": "b", "ttl_turns": 0}, flat=True))
    assert str(info.value) == 'invalid reminder: `params._meta["harn.reminder"].ttl_turns` must be an integer >= 1 (got 0)'


def test_user_sees_the_message_as_a_jsonrpc_error():
    request = {"jsonrpc": "2.0", "id": 5, "method": "session/inject_reminder",
               "params": {"sessionId": "s", "body": "b", "ttlTurns": 2.0}}
    [send] = translate("acp", "peer", "standard", "legacy", json.dumps(request).encode())
    assert send.to == "host"
    assert json.loads(send.data) == {"jsonrpc": "2.0", "id": 5, "error": {
        "code": -32602, "message": "invalid reminder: `params.ttlTurns` must be an integer >= 1 (got 2.0)"}}


# -- the size of a reminder as a whole (spec §12) -------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from bridge.model import Reminder, dump_json, encoded_size, load_json, size_at_most  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                               max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(body=st.text(min_size=1).filter(str.strip), texts=st.lists(st.text(), min_size=3, max_size=3),
       tags=st.lists(st.text(min_size=1).filter(str.strip), max_size=4), meta=st.none() | st.dictionaries(
           st.text(max_size=8), _JSON, max_size=4), extra=st.dictionaries(st.text(max_size=8), _JSON, max_size=3))
def test_the_cheap_size_bound_is_never_below_the_stored_size(body, texts, tags, meta, extra):
    """Whatever the text (quotes, control characters, astral or lone surrogates) and whatever JSON
    rides in `_meta` or unknown fields (floats in exponent form, NaN, huge integers), the bound the
    policy checks first is at least what the reminder costs queued, which is exactly `dump_json`."""
    reminder = Reminder(id=texts[0] or "r", body=body, dedupe_key=texts[1], source=texts[2], tags=tags,
                        meta=meta, extra=extra)
    stored = dump_json(reminder)
    assert encoded_size(reminder) == len(stored.encode("utf-8", "surrogatepass"))
    assert size_at_most(reminder) >= encoded_size(reminder)
    assert json.dumps(load_json(stored).model_dump(mode="json"), sort_keys=True) == json.dumps(
        reminder.model_dump(mode="json"), sort_keys=True)


#: Every field of a reminder but `_meta` and unknown ones, at random: `Reminder(**fields)`.
_PLAIN_FIELDS = st.fixed_dictionaries({
    "id": st.text(min_size=1), "body": st.text(min_size=1).filter(str.strip),
    "tags": st.lists(st.text(min_size=1).filter(str.strip), max_size=6), "dedupe_key": st.text(),
    "source": st.text(), "provider_id": st.text(), "originating_agent_id": st.text(),
    "ttl_turns": st.none() | st.integers(min_value=1), "fired_at_turn": st.none() | st.integers(min_value=1),
    "propagate": st.sampled_from(["all", "session", "none"]),
    "role_hint": st.sampled_from(["system", "developer", "user_block", "ephemeral_cache"]),
    "mode": st.sampled_from(["interrupt_immediate", "finish_step", "audit_only"]),
    "authority": st.none() | st.sampled_from(["contract", "corrective", "advisory"]),
    "preserve_on_compact": st.booleans(), "originals": st.dictionaries(st.text(max_size=20), st.text(), max_size=4)})


@settings(max_examples=300, deadline=None)
@given(fields=_PLAIN_FIELDS)
def test_the_bound_of_a_plain_reminder_counts_every_field_at_its_worst(fields):
    """A reminder with no `_meta`, no unknown fields and only string originals is bounded without
    encoding it: every field set, the longest enum values, huge integers and control characters
    (in the originals too) still fit under it."""
    reminder = Reminder(**fields)
    assert size_at_most(reminder) >= encoded_size(reminder)


def test_a_plain_reminder_of_control_characters_and_every_field_set_fits_its_bound():
    worst = "\x01" * 50
    reminder = Reminder(id=worst, body=worst, tags=[worst, worst + "x"], dedupe_key=worst, source=worst,
                        provider_id=worst, originating_agent_id=worst, ttl_turns=10**18 - 1,
                        fired_at_turn=10**18 - 1, propagate="session", role_hint="ephemeral_cache",
                        mode="interrupt_immediate", authority="corrective", preserve_on_compact=True,
                        originals={worst: worst, "source": worst})
    assert size_at_most(reminder) >= encoded_size(reminder)


# -- a reminder as it waits (`Packed`, spec §4: delivered later unchanged) ------------------------------

from bridge.model import Packed  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(fields=_PLAIN_FIELDS, meta=st.none() | st.dictionaries(st.text(max_size=8), _JSON, max_size=3),
       extra=st.dictionaries(st.text(max_size=8), _JSON, max_size=3), unset=st.sets(st.sampled_from(
           ["tags", "dedupe_key", "source", "ttl_turns", "propagate", "mode", "originals", "meta", "extra"])))
def test_a_packed_reminder_comes_back_equal_with_the_same_fields_set(fields, meta, extra, unset):
    fields = {**fields, "meta": meta, "extra": extra}
    reminder = Reminder(**{k: v for k, v in fields.items() if k not in unset})
    packed = Packed.of(reminder)
    back = packed.reminder()
    assert back == reminder and back.model_fields_set == reminder.model_fields_set
    assert dump_json(back) == dump_json(reminder)
    assert (packed.id, packed.dedupe_key, packed.mode) == (reminder.id, reminder.dedupe_key, reminder.mode)
    back.tags.append("changed")
    back.extra["changed"] = True
    assert packed.reminder() == reminder  # what it gave is the caller's own


def test_a_packed_reminder_costs_a_fraction_of_the_model():
    """The bench's goal (≤ 2,048 B per pending reminder, bench/memory.py) is met by holding it packed."""
    import sys
    reminder = Reminder(id="r-1-0", body="Reminder 0 for session 1.", tags=["ci"], dedupe_key="ci:0", ttl_turns=3)
    model = sys.getsizeof(reminder) + sys.getsizeof(reminder.__dict__) + sys.getsizeof(reminder.model_fields_set) \
        + sys.getsizeof(reminder.extra) + sys.getsizeof(reminder.originals) + sys.getsizeof(reminder.tags)
    packed = Packed.of(reminder)
    assert sys.getsizeof(packed) + sys.getsizeof(packed[0]) + sys.getsizeof(packed[3]) < model / 4
