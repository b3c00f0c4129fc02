"""State keyed by its owner's scope (`bridge/state/scope.py`), seen from the wire: two clients that
reach the same route, on one replica or on two sharing a real Redis, never pay into one budget.

Before the scope, a session's bucket was named after a per-process flow counter (`route#1`): the
first session on each replica of a fleet shared one bucket, so one user's reminders spent another's.
"""
from __future__ import annotations

import pytest

from tests.integration.test_fleet import fleet, mcp_route, open_session, remind, stop

pytestmark = pytest.mark.fault


@pytest.fixture
def upstream():
    from tests.fault.test_serve import faulty

    running = faulty()
    yield running
    running.stop()


async def test_sessions_on_two_replicas_never_share_a_session_budget(tmp_path, upstream, redis_url):
    one, two = fleet(tmp_path, mcp_route(upstream, '[routes.mcp.budget]\nrate = 1\nburst = 2\nkey = "session"\n'),
                     redis_url)
    try:
        alice = await open_session(one.port)  # the first session each replica ever made
        bob = await open_session(two.port)
        spent = [f for f in await remind(one.port, alice, 1, 2) if f.get("method") == "notifications/reminder"]
        assert len(spent) == 2  # alice's burst
        got = [f for f in await remind(two.port, bob, 1, 2) if f.get("method") == "notifications/reminder"]
        assert len(got) == 2  # bob's own burst, whatever alice spent
        more = [f for f in await remind(two.port, alice, 2, 1) if f.get("method") == "notifications/reminder"]
        assert more == []  # and alice's bucket is hers on every replica: still empty
    finally:
        stop(one, two)


async def test_a_host_that_moves_to_another_replica_right_after_initialize_finds_its_session(tmp_path, upstream,
                                                                                            redis_url):
    """The record of a session's handshake reaches Redis before the `initialize` answer reaches the
    host. Written after it (as it once was), a host whose very next request lands on the other replica
    was taken there for a host without reminder support, for the whole session."""
    one, two = fleet(tmp_path, mcp_route(upstream), redis_url)
    try:
        for attempt in range(40):
            session = await open_session(one.port)
            frames = await remind(two.port, session, 1, 1)
            assert [f["method"] for f in frames if "method" in f] == ["notifications/reminder"], (attempt, frames)
    finally:
        stop(one, two)
