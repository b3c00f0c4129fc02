"""`SessionReminders` (spec §4): the reminders one session holds, deduplicated by key, expired
after their turns, bounded in number, and `audit_only` ones never rendered."""
from __future__ import annotations

from bridge.lifecycle import Deduped, Expired, SessionReminders
from bridge.model import Reminder


def reminder(rid: str, **fields) -> Reminder:
    return Reminder(id=rid, body=f"body of {rid}", **fields)


def ids(session: SessionReminders) -> list[str]:
    return [r.id for r in session.reminders()]


def test_reminders_are_kept_in_arrival_order():
    session = SessionReminders()
    for rid in ("a", "b", "c"):
        assert session.add(reminder(rid)) == (None, [])
    assert ids(session) == ["a", "b", "c"] and len(session) == 3


def test_a_newer_reminder_replaces_the_pending_one_with_its_dedupe_key():
    session = SessionReminders()
    session.add(reminder("a", dedupe_key="k"))
    session.add(reminder("b"))
    assert session.add(reminder("c", dedupe_key="k")) == (Deduped("c", "k", ["a"]), [])
    assert session.add(reminder("d", dedupe_key="k")) == (Deduped("d", "k", ["c"]), [])
    assert ids(session) == ["b", "d"]  # the newest, at the end: it came last


def test_reminders_without_a_key_or_with_another_key_are_never_deduplicated():
    session = SessionReminders()
    session.add(reminder("a"))
    session.add(reminder("b", dedupe_key="k1"))
    assert session.add(reminder("c")) == (None, [])
    assert session.add(reminder("d", dedupe_key="k2")) == (None, [])
    assert ids(session) == ["a", "b", "c", "d"]


def test_the_limit_pushes_out_the_oldest_and_says_so():
    session = SessionReminders(limit=3)
    for i in range(3):
        session.add(reminder(f"r{i}"))
    session.end_turn()
    deduped, pushed_out = session.add(reminder("r3"))
    assert deduped is None and pushed_out == [Expired("r0", "cleared", 1)]
    assert ids(session) == ["r1", "r2", "r3"]


def test_a_flood_stays_within_the_limit():
    session = SessionReminders(limit=64)
    gone = [e for i in range(10_000) for e in session.add(reminder(f"f{i}", dedupe_key=f"k{i}"))[1]]
    assert len(session) == 64 and len(gone) == 10_000 - 64
    assert ids(session)[0] == "f9936" and ids(session)[-1] == "f9999"


def test_ttl_counts_completed_turns_and_reminders_without_one_stay():
    session = SessionReminders()
    session.add(reminder("once", ttl_turns=1))
    session.add(reminder("twice", ttl_turns=2))
    session.add(reminder("always"))
    assert session.end_turn() == [Expired("once", "ttl_expired", 1)]
    assert ids(session) == ["twice", "always"]
    assert session.end_turn() == [Expired("twice", "ttl_expired", 2)]
    for _ in range(100):
        assert session.end_turn() == []
    assert ids(session) == ["always"] and session.turn == 102


def test_audit_only_reminders_are_held_but_never_rendered():
    session = SessionReminders()
    session.add(reminder("seen"))
    session.add(reminder("audit", mode="audit_only"))
    session.add(reminder("later", mode="finish_step"))
    assert [r.id for r in session.to_render()] == ["seen", "later"]
    assert ids(session) == ["seen", "audit", "later"]


def test_two_sessions_never_share_their_reminders():
    one, other = SessionReminders(), SessionReminders()
    one.add(reminder("mine", dedupe_key="k"))
    assert other.add(reminder("theirs", dedupe_key="k")) == (None, [])
    one.end_turn()
    assert ids(one) == ["mine"] and ids(other) == ["theirs"] and other.turn == 0


def test_hostile_ids_and_keys_are_held_as_given():
    huge_id, odd_key = "i" * 100_000, "k\x00\x1b[2J\ud800"
    session = SessionReminders()
    session.add(reminder(huge_id, dedupe_key=odd_key))
    deduped, _ = session.add(reminder("next", dedupe_key=odd_key))
    assert deduped == Deduped("next", odd_key, [huge_id])


def test_the_same_id_sent_twice_is_kept_twice_and_the_limit_follows_a_reload():
    session = SessionReminders(limit=3)
    session.add(reminder("a"))
    session.add(reminder("a"))
    assert ids(session) == ["a", "a"]
    session.limit = 1
    assert session.add(reminder("b")) == (None, [Expired("a", "cleared", 0), Expired("a", "cleared", 0)])
