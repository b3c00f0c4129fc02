"""The outbox poll cadence (`Cadence`, `Poller`, docs/outbox.md): the server's `nextPollMs` within
floor and ceiling, `hasMore` at once but never spinning, and back-off on quiet or failing streams."""
from __future__ import annotations

from bridge.outbox.poller import Cadence, Poller


def test_cadence_honours_next_poll_ms_within_floor_and_ceiling():
    poller = Poller(Cadence(floor_ms=1000, ceiling_ms=60_000), now=0.0)
    assert poller.due(0.0)
    poller.start(0.0)
    assert not poller.due(100.0)  # one read in flight at a time
    poller.succeeded(1.0, events=1, has_more=False, next_poll_ms=30_000)
    assert poller.wait_ms(1.0) == 30_000
    poller.start(31.0)
    poller.succeeded(31.0, events=0, has_more=False, next_poll_ms=5)  # floored
    assert poller.wait_ms(31.0) == 1000
    poller.start(32.0)
    poller.succeeded(32.0, events=0, has_more=False, next_poll_ms=10 ** 9)  # ceilinged
    assert poller.wait_ms(32.0) == 60_000


def test_has_more_reads_at_once_but_never_spins():
    poller = Poller(Cadence(floor_ms=1000, ceiling_ms=8000, max_chain=3), now=0.0)
    for _ in range(3):
        poller.start(0.0)
        poller.succeeded(0.0, events=100, has_more=True, next_poll_ms=60_000)
        assert poller.due(0.0)
    poller.start(0.0)
    poller.succeeded(0.0, events=100, has_more=True, next_poll_ms=None)
    assert not poller.due(0.0) and poller.wait_ms(0.0) == 1000


def test_quiet_and_failing_streams_back_off_and_recover():
    cadence = Cadence(floor_ms=1000, ceiling_ms=8000, timeout_ms=30_000)
    poller = Poller(cadence, now=0.0)
    waits = []
    for _ in range(5):
        poller.start(0.0)
        poller.failed(0.0)
        waits.append(poller.wait_ms(0.0))
    assert waits == [2000, 4000, 8000, 8000, 8000]
    poller.start(0.0)
    poller.succeeded(0.0, events=0, has_more=False, next_poll_ms=None)
    assert poller.wait_ms(0.0) == 2000  # quiet, not failing
    poller.start(0.0)
    poller.succeeded(0.0, events=2, has_more=False, next_poll_ms=None)
    assert poller.wait_ms(0.0) == 1000  # events: back to the floor
    poller.start(10.0)
    assert not poller.expired(39.0) and poller.expired(40.0)
