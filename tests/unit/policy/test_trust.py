"""`trust.screen` (spec §7): what an untrusted reminder may carry. Control characters are stripped,
a peer's `roleHint` is lowered to the ceiling, and whatever is over a limit is refused with the
limit, its value and the field named, never the reminder's own text (the message is logged)."""
from __future__ import annotations

from typing import Any

import pytest

from bridge.model import Reminder
from bridge.policy.trust import TrustRefusal, pending_refusal, screen
from bridge.rules import Trust

SECRET = "s3cret-body"


def passed(result: Any) -> tuple[Reminder, dict[str, Any]]:
    """The reminder the limits let through and what was changed (core20: `screen` returns the pair)."""
    assert not isinstance(result, TrustRefusal), result
    return result


def refused(result: Any) -> TrustRefusal:
    assert isinstance(result, TrustRefusal), result
    assert SECRET not in result.message
    return result


def test_a_clean_reminder_passes_as_it_is():
    reminder = Reminder(id="r1", body="Rebase first.\n\tThen push.", tags=["git"], dedupe_key="k")
    assert passed(screen(reminder, Trust(), from_peer=True)) == (reminder, {})


def test_control_characters_are_stripped_from_body_and_tags_and_counted():
    reminder = Reminder(body="a\x00b\x1b[2Jc\x7f\x85d\u009be\tf\ng", tags=["x\x07", "y", "\x01y\x02"])
    cleaned, changes = passed(screen(reminder, Trust(), from_peer=True))
    assert cleaned.body == "ab[2Jc\x7fde\tf\ng"  # C0 and C1 go (tab and newline stay); DEL is no control here
    assert cleaned.tags == ["x", "y"]  # cleaned, then one of each
    assert changes == {"stripped": 7}


def test_a_body_that_is_only_control_characters_is_refused():
    result = refused(screen(Reminder(body="\x1b\x07 \x00"), Trust(), from_peer=True))
    assert (result.limit, result.value) == ("strip_control", True) and "`body`" in result.message


def test_without_strip_control_the_text_is_left_alone():
    reminder = Reminder(body="a\x1bb", tags=["t\x07"])
    assert passed(screen(reminder, Trust(strip_control=False), from_peer=True)) == (reminder, {})


def test_the_body_limit_counts_utf8_bytes():
    trust = Trust(max_body_bytes=5)
    assert passed(screen(Reminder(body="é€"), trust, from_peer=True))  # 2 + 3 bytes
    result = refused(screen(Reminder(body="é€" + SECRET), trust, from_peer=True))
    assert (result.limit, result.value) == ("max_body_bytes", 5)
    assert result.message == "reminder refused: `body` is 16 bytes, over max_body_bytes = 5"
    assert result.data() == {"limit": "max_body_bytes", "value": 5}


def test_tags_over_their_limits_are_refused_by_position_not_by_text():
    assert refused(screen(Reminder(body="b", tags=["a", "b", "c"]), Trust(max_tags=2), from_peer=True)).limit == "max_tags"
    result = refused(screen(Reminder(body="b", tags=["ok", SECRET * 10]), Trust(max_tag_chars=20), from_peer=True))
    assert result.limit == "max_tag_chars" and "`tags[1]` is 110 characters" in result.message


@pytest.mark.parametrize("field, limit, value", [
    ("id", "max_id_bytes", "i" * 129),
    ("id", "max_id_bytes", "\ud800" * 43),  # a lone surrogate weighs 3 bytes like any other BMP character
    ("dedupe_key", "max_dedupe_key_bytes", "€" * 86),
])
def test_ids_and_dedupe_keys_are_bounded_in_bytes(field, limit, value):
    result = refused(screen(Reminder(body="b", **{field: value}), Trust(), from_peer=True))
    assert result.limit == limit and value not in result.message


def test_a_peers_role_hint_is_lowered_to_the_ceiling_and_a_hosts_is_not():
    trust = Trust(role_hint_ceiling="user_block")
    reminder = Reminder(body="b", role_hint="system", originals={"roleHint": "system"})
    lowered, changes = passed(screen(reminder, trust, from_peer=True))
    assert lowered.role_hint == "user_block" and "roleHint" not in lowered.originals  # never restored downstream
    assert changes == {"roleHint": "system lowered to role_hint_ceiling = user_block"}
    assert passed(screen(reminder, trust, from_peer=False)) == (reminder, {})
    low = Reminder(body="b", role_hint="ephemeral_cache")
    assert passed(screen(low, trust, from_peer=True)) == (low, {})  # below the ceiling already


def test_a_reminder_too_large_as_a_whole_names_its_largest_field_shown_safely():
    name = "\x1b]0;owned\x07" + "n" * 100  # an unknown field's name, chosen by the sender
    reminder = Reminder(body="b", extra={name: "v" * 20_000, "small": 1})
    result = refused(screen(reminder, Trust(), from_peer=True))
    assert result.limit == "max_reminder_bytes" and result.value == 16384
    assert "\x1b" not in result.message and "\x07" not in result.message
    assert "(the largest field is `\\u001b]0;owned\\u0007" in result.message and "...`" in result.message


def test_a_session_takes_reminders_only_under_its_pending_limit():
    trust = Trust(max_pending_per_session=3)
    assert pending_refusal(trust, 2) is None
    result = pending_refusal(trust, 3)
    assert (result.limit, result.value) == ("max_pending_per_session", 3) and "holds 3 pending" in result.message
