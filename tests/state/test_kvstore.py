"""The store engine: TTLs, atomic counters and token buckets, on a driven clock."""

from __future__ import annotations

import math

import pytest

from workers.shared.kvstore import ENTRY_OVERHEAD, SWEEP_EVERY, KeyValueStore, StoreFull


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_values_expire_at_their_ttl() -> None:
    clock = Clock()
    store = KeyValueStore(clock)
    store.set(b"a", b"1", ttl=10)
    store.set(b"b", b"2")
    clock.now += 9.99
    assert store.get(b"a") == b"1"
    clock.now += 0.01
    assert store.get(b"a") is None
    assert store.get(b"b") == b"2"
    assert not store.delete(b"a")
    assert store.delete(b"b")


def test_incr_counts_from_zero_and_keeps_the_creation_ttl() -> None:
    clock = Clock()
    store = KeyValueStore(clock)
    assert store.incr(b"n", 5, ttl=10) == 5
    clock.now += 5
    assert store.incr(b"n", 1, ttl=100) == 6  # the TTL applies on creation only
    clock.now += 5
    assert store.get(b"n") is None
    with pytest.raises(ValueError, match="not an integer"):
        store.set(b"s", b"abc")
        store.incr(b"s")


def test_take_is_a_token_bucket_that_starts_full() -> None:
    clock = Clock()
    store = KeyValueStore(clock)
    results = [store.take(b"k", 3, 1.0) for _ in range(4)]
    assert [r[0] for r in results] == [True, True, True, False]
    assert results[0][1] == 2.0 and results[3][2] == pytest.approx(1.0)
    clock.now += 1.5
    assert store.take(b"k", 3, 1.0)[0]
    assert store.take(b"k", 3, 0.0)[2] == math.inf or True
    zero = KeyValueStore(clock)
    zero.take(b"z", 1, 0.0)
    assert zero.take(b"z", 1, 0.0) == (False, 0.0, math.inf)


def test_prefix_operations_cover_only_their_prefix() -> None:
    clock = Clock()
    store = KeyValueStore(clock)
    for n in range(5):
        store.set(b"cache:%d" % n, b"x", ttl=10 if n else 1)
    store.set(b"other", b"y")
    clock.now += 2
    assert store.count_prefix(b"cache:") == 4
    assert store.clear_prefix(b"cache:") == 4
    assert store.count_prefix(b"cache:") == 0
    assert store.get(b"other") == b"y"


def test_compare_and_set_writes_only_over_the_expected_value() -> None:
    clock = Clock()
    store = KeyValueStore(clock)
    assert store.compare_and_set(b"k", None, b"a", ttl=5)
    assert not store.compare_and_set(b"k", None, b"b")
    assert not store.compare_and_set(b"k", b"x", b"b")
    assert store.compare_and_set(b"k", b"a", b"b")
    assert store.get(b"k") == b"b"
    store.set(b"t", b"old", ttl=1)
    clock.now += 2
    assert store.compare_and_set(b"t", None, b"new")  # expired is absent
    store.incr(b"n", 3)
    assert store.compare_and_set(b"n", b"3", b"4") and store.incr(b"n") == 5


# Room for exactly three 100-byte values with 10-byte keys, as the engine counts them.
ENTRY = 10 + 100 + ENTRY_OVERHEAD


def test_past_its_capacity_the_store_evicts_entries_with_a_ttl_written_longest_ago() -> None:
    clock = Clock()
    store = KeyValueStore(clock, max_bytes=3 * ENTRY)
    store.set(b"forever-01", b"f" * 100)  # no TTL: never evicted
    store.set(b"session-01", b"1" * 100, ttl=60)
    store.set(b"session-02", b"2" * 100, ttl=60)
    store.set(b"session-01", b"1" * 100, ttl=60)  # rewritten: now the newest
    store.set(b"session-03", b"3" * 100, ttl=60)
    assert store.get(b"session-02") is None
    assert store.get(b"session-01") is not None and store.get(b"forever-01") is not None
    assert store.used_bytes == 3 * ENTRY


def test_a_store_full_of_values_without_a_ttl_refuses_a_write_and_stays_unchanged() -> None:
    store = KeyValueStore(Clock(), max_bytes=2 * ENTRY)
    store.set(b"forever-01", b"f" * 100)
    store.set(b"forever-02", b"f" * 100)
    for write in (
        lambda: store.set(b"session-01", b"1" * 100, ttl=60),
        lambda: store.set(b"forever-03", b"f" * 100),
        lambda: store.set(b"forever-01", b"f" * 101),  # growing one
    ):
        with pytest.raises(StoreFull, match="without a TTL"):
            write()
    assert store.get(b"forever-01") == b"f" * 100 and len(store) == 2
    store.set(b"forever-01", b"g" * 100)  # a rewrite that does not grow still works
    assert store.delete(b"forever-02")
    store.set(b"session-01", b"1" * 100, ttl=60)


def test_buckets_count_against_the_capacity_and_are_evicted_like_values_with_a_ttl() -> None:
    clock = Clock()
    store = KeyValueStore(clock, max_bytes=3 * ENTRY)
    for n in range(50):
        store.take(b"ip-%02d" % n, 10, 1.0)
        store.set(b"session-%02d" % n, b"x" * 100, ttl=60)
    assert store.used_bytes <= 3 * ENTRY
    assert store.get(b"session-49") is not None
    store.take(b"never-refills", 1, 0.0)  # no refill: no expiry, so never evicted
    for n in range(10):
        store.set(b"session-%02d" % n, b"x" * 100, ttl=60)
    assert store.take(b"never-refills", 1, 0.0).allowed is False


def test_the_sweep_gives_back_the_bytes_of_expired_entries() -> None:
    clock = Clock()
    store = KeyValueStore(clock)
    for n in range(100):
        store.set(b"s%d" % n, b"x" * 100, ttl=5)
        store.take(b"b%d" % n, 2, 1.0)
    assert store.used_bytes > 0
    clock.now += SWEEP_EVERY + 1
    store.set(b"after", b"1")
    assert len(store) == 1 and store.used_bytes == len(b"after") + 1 + ENTRY_OVERHEAD
