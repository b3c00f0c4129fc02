"""`MemoryState`, the one-process backend, with an injected clock: bounded however many keys
arrive, everything expiring on time, and a bucket keeping its tokens when a reload changes its
rate (both backends against a real redis-server: tests/integration/test_state.py)."""
from __future__ import annotations

from bridge.state import BucketCharge, MemoryState


class Clock:
    def __init__(self, t: float = 1_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


async def test_memory_state_is_bounded_and_expires():
    clock = Clock()
    state = MemoryState(clock=clock, max_keys=10)
    for i in range(100):
        assert state.charge_now([BucketCharge(f"k{i}", 60, 1)]) is None
        state.queue_push_now(f"q{i}", "r", "x", dedupe_key=None, limit=4, ttl_s=5)
        state.put_record_now(f"r{i}", {"i": i}, 5)
    assert state.sizes() == {"buckets": 10, "queues": 10, "records": 10}
    clock.advance(1.01)  # an empty 60/min, burst 1 bucket is full after 1 s: gone, and nothing is lost
    assert state.sizes()["buckets"] == 0
    assert state.charge_now([BucketCharge("k99", 60, 1)]) is None
    clock.advance(4)
    assert state.sizes() == {"buckets": 0, "queues": 0, "records": 0}
    assert state.get_record_now("r99") is None


def test_a_memory_bucket_keeps_its_tokens_when_its_rate_changes():
    clock = Clock()
    state = MemoryState(clock=clock)
    assert state.charge_now([BucketCharge("k", 60, 2)]) is None
    assert state.charge_now([BucketCharge("k", 60, 2)]) is None
    assert state.levels_now([BucketCharge("k", 30, 4)]) == [0.0]  # a reload: same key, new size and rate
    refused = state.charge_now([BucketCharge("k", 30, 4)])
    assert (refused.limit, refused.retry_after_ms) == (4, 2000)
    clock.advance(2)
    assert state.charge_now([BucketCharge("k", 30, 4)]) is None
    assert state.sizes()["buckets"] == 1


def test_a_task_queue_follows_the_pending_queue_rules_and_reports_ids():
    from bridge.state.memory import MemoryState
    state = MemoryState()
    assert state.queue_push_now("q", "a", "{}", dedupe_key="k", limit=2, ttl_s=60) == ([], [])
    assert state.queue_push_now("q", "b", "{}", dedupe_key="k", limit=2, ttl_s=60) == (["a"], [])
    state.queue_push_now("q", "c", "{}", dedupe_key=None, limit=2, ttl_s=60)
    assert state.queue_push_now("q", "d", "{}", dedupe_key="", limit=2, ttl_s=60) == ([], ["b"])
    assert state.queue_len_now("q") == 2 and state.queued() == 2
    assert state.queue_take_now("q") == ["{}", "{}"] and state.queue_len_now("q") == 0
