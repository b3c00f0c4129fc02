"""The table of open 2026-07-28 listen streams: found by the scope of the flow that writes and the
subscription it names, so one client's ids never reach another's stream; bounded in bytes."""
from __future__ import annotations

from bridge.state.scope import Scope
from bridge.transports.http.listening import LISTEN_BYTES, ListenStreams

ALICE = Scope.identity("r", "header:authorization", "Bearer alice")
BOB = Scope.identity("r", "header:authorization", "Bearer bob")
KEY = ("str", "l1")


def test_a_stream_is_found_by_its_scope_and_subscription_only():
    table = ListenStreams()
    response = object()
    table.open(ALICE, KEY, response)
    assert table.get(ALICE, KEY).response is response
    assert table.get(BOB, KEY) is None  # the same id from another client names nothing of alice's
    assert table.get(ALICE, ("str", "l2")) is None


def test_closing_an_old_stream_leaves_a_newer_one_under_the_same_id():
    table = ListenStreams()
    old, new = object(), object()
    name = table.open(ALICE, KEY, old)
    table.open(ALICE, KEY, new)
    table.close(name, old)
    assert table.get(ALICE, KEY).response is new
    table.close(name, new)
    assert len(table) == 0


def test_a_stream_has_room_for_its_bound_in_bytes_and_no_more():
    table = ListenStreams()
    table.open(ALICE, KEY, object())
    listener = table.get(ALICE, KEY)
    assert listener.room(LISTEN_BYTES)
    listener.queued = LISTEN_BYTES - 10
    assert listener.room(10) and not listener.room(11)
