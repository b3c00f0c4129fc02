"""The one bucket algorithm and the table that holds buckets by key."""
from bridge.state.buckets import Bucket, BucketTable, take_tokens


def test_a_charge_takes_one_token_from_every_bucket_or_none():
    full, empty = Bucket(2.0, 0.0), Bucket(0.0, 0.0)
    assert take_tokens([(full, 1.0, 2), (empty, 1.0, 2)], 0.5, []) == (1, 0.5, 500)
    assert full.tokens == 2.0  # nothing charged: all or none
    made: list[Bucket] = []
    assert take_tokens([(full, 1.0, 2), (None, 1.0, 2)], 0.5, made) is None
    assert full.tokens == 1.0 and made[1].tokens == 1.0 and made[1].at == 0.5


def test_the_table_holds_at_most_max_keys_dropping_the_least_recently_used():
    table = BucketTable(max_keys=2, fill_s=60.0)
    for key in ("a", "b"):
        table.put(key, Bucket(0.0, 0.0), 0.0)
    table.put("a", table.get("a"), 1.0)  # "a" used again: "b" is now the oldest
    table.put("c", Bucket(0.0, 2.0), 2.0)
    assert len(table) == 2 and table.get("b") is None and table.get("a") is not None


def test_a_bucket_is_forgotten_only_once_it_would_be_full_again():
    table = BucketTable(max_keys=10, fill_s=2.0)
    table.put("a", Bucket(0.0, 0.0), 0.0)
    table.put("b", Bucket(0.0, 1.0), 1.0)
    assert table.get("a") is not None  # 1 s after its last charge: still filling
    table.put("c", Bucket(0.0, 2.5), 2.5)
    assert table.get("a") is None and table.get("b") is not None
    table.expire(3.0)
    assert [key for key, _ in table.items()] == ["c"]


def test_a_new_table_keeps_the_newest_buckets_of_the_old_one_that_fit():
    old = BucketTable(max_keys=3, fill_s=60.0)
    for i, key in enumerate("abc"):
        old.put(key, Bucket(float(i), 0.0), 0.0)
    new = BucketTable(max_keys=2, fill_s=30.0, old=old)
    assert [key for key, _ in new.items()] == ["b", "c"] and new.get("c").tokens == 2.0
