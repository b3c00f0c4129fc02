"""`PendingQueue`: the one bounded queue every in-process pending reminder waits in."""
from bridge.pending import PendingQueue, Put
from bridge.policy.budget import Coalesced, Coalescer


def test_items_keep_the_order_the_newest_arrived_and_a_key_replaces_in_place():
    queue: PendingQueue[str] = PendingQueue()
    assert queue.put("a", "A") == Put(None, None, [])
    queue.put("b", "B")
    assert queue.put("a", "A2") == Put("A", None, [])
    assert list(queue) == ["B", "A2"] and "a" in queue and len(queue) == 2


def test_the_newest_of_a_dedupe_key_replaces_the_older():
    queue: PendingQueue[str] = PendingQueue()
    queue.put(1, "one", dedupe="k")
    queue.put(2, "two")
    assert queue.put(3, "three", dedupe="k").deduped == "one"
    assert queue.items() == [(2, "two"), (3, "three")]
    queue.pop(3)
    assert queue.put(4, "four", dedupe="k").deduped is None  # the key left with its holder


def test_past_the_count_or_the_bytes_the_oldest_are_pushed_out_and_handed_back():
    queue: PendingQueue[str] = PendingQueue(limit=2, max_bytes=10)
    queue.put("a", "A", size=4)
    queue.put("b", "B", size=4)
    assert queue.put("c", "C", size=1).evicted == ["A"]
    assert queue.put("d", "D", size=10).evicted == ["B", "C"]
    assert queue.bytes == 10 and list(queue) == ["D"]


def test_room_says_which_bound_a_newcomer_would_pass():
    queue: PendingQueue[str] = PendingQueue(limit=1, max_bytes=10)
    assert queue.room("a", 11) == "bytes"
    queue.put("a", "A", size=8)
    assert queue.room("b") == "count"
    assert queue.room("a", 10) is None and queue.room("a", 11) == "bytes"  # a replacement adds no count


def test_take_empties_the_queue_oldest_first():
    queue: PendingQueue[str] = PendingQueue()
    queue.put("a", "A", dedupe="k", size=3)
    queue.put("b", "B", size=3)
    assert queue.take() == ["A", "B"] and len(queue) == 0 and queue.bytes == 0
    assert queue.put("c", "C", dedupe="k").deduped is None


def test_the_coalescer_is_a_pending_queue_of_data_that_releases_what_its_budget_admits():
    held = Coalescer()
    for key in ("x", "y"):
        held.put(key, Coalesced(key, f"reminder {key}", deliver=None))
    assert [item.key for item in held.release(lambda item: item.key == "y")] == ["y"]
    assert [item.key for item in held] == ["x"] and held.wake_at is None
