"""The book of 2026-07-28 listen streams and held reminders: per scope, newest stream first, one
held queue per scope shared by whoever asks, the oldest scope's let go past the bound."""
from __future__ import annotations

from bridge.pipeline.subscriptions import Subscriptions
from bridge.state.scope import Scope

ALICE = Scope.identity("r", "header:authorization", "Bearer alice")
BOB = Scope.identity("r", "header:authorization", "Bearer bob")


def test_the_newest_open_stream_of_the_scope_takes_reminders_and_a_closed_one_none():
    book = Subscriptions()
    book.opened(ALICE, ("str", "a"), "a")
    book.opened(ALICE, ("str", "b"), "b")
    assert book.stream(ALICE) == (("str", "b"), "b") and book.stream(BOB) is None
    book.closed(ALICE, ("str", "b"))
    assert book.stream(ALICE) == (("str", "a"), "a")
    book.closed(ALICE, ("str", "a"))
    assert book.stream(ALICE) is None


def test_a_scope_has_one_held_queue_and_a_full_book_lets_the_oldest_scope_go():
    book = Subscriptions(max_scopes=1)
    held, evicted = book.held(ALICE)
    held.append("r1")
    assert book.held(ALICE) == (held, []) and list(held) == ["r1"]  # the same queue, whoever asks
    bobs, evicted = book.held(BOB)
    assert list(bobs) == [] and evicted == ["r1"]
