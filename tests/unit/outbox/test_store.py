"""The outbox store (`Store`, docs/outbox.md): events deduplicated per source, the cursor moving with
them, what survives a restart, and a poll stored whole or not at all."""
from __future__ import annotations

import sqlite3

import pytest

from bridge.outbox.store import Store


def test_store_dedupes_and_moves_the_cursor_with_the_events(tmp_path):
    path = tmp_path / "s.sqlite3"
    store = Store(path)
    assert store.cursor("src", "acme://n") is None
    assert store.accept("src", "acme://n", [("e1", "event", "{}"), ("e2", "event", "{}")], "2", 1) == 2
    assert store.accept("src", "acme://n", [("e2", "event", "{}"), ("e3", "event", "{}")], "3", 2) == 1
    assert store.accept("other", "acme://n", [("e1", "event", "{}")], None, 2) == 1  # ids are per source
    assert [r[1] for r in store.undelivered("src")] == ["e1", "e2", "e3"]
    store.mark_delivered([r[0] for r in store.undelivered("src")][:2])
    store.close()
    again = Store(path)  # a restart: the cursor and what was not handed over survive
    assert again.cursor("src", "acme://n") == "3" and [r[1] for r in again.undelivered("src")] == ["e3"]
    with pytest.raises(sqlite3.Error):  # the second item cannot be written: the whole poll is not stored
        again.accept("src", "acme://n", [("e4", "event", "{}"), ("e5", "event", object())], "5", 3)  # type: ignore[list-item]
    assert again.cursor("src", "acme://n") == "3"  # nothing stored, so the cursor did not move
    assert [r[1] for r in again.undelivered("src")] == ["e3"]
