"""cache.TtlCache: TTL rules, lazy expiry, JSON helpers, injectable clock and store."""

from __future__ import annotations

import threading

import pytest

from socketify.state.cache import CacheBackend, MemoryBackend, TtlCache


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make(clock: FakeClock, default_ttl: float = 0) -> TtlCache:
    return TtlCache(default_ttl, clock=clock)


def test_set_then_get_str_and_bytes(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("s", "text")
    cache.set("b", b"\x00bytes")
    assert cache.get("s") == "text"
    assert cache.get("b") == b"\x00bytes"
    assert cache.get("missing") is None
    assert cache.get("missing", "dflt") == "dflt"


def test_set_replaces_value_and_ttl(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("k", "one", ttl=1)
    cache.set("k", "two")  # no ttl, no default: forever
    clock.advance(100)
    assert cache.get("k") == "two"


def test_values_must_be_str_or_bytes(clock: FakeClock) -> None:
    with pytest.raises(TypeError, match="set_json"):
        make(clock).set("k", {"a": 1})  # type: ignore[arg-type]


def test_default_of_zero_means_no_expiry(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("k", "v")
    clock.advance(10**9)
    assert cache.get("k") == "v"


def test_ttl_zero_uses_the_default_ttl(clock: FakeClock) -> None:
    cache = make(clock, default_ttl=10)
    cache.set("k", "v")
    clock.advance(9.999)
    assert cache.get("k") == "v"
    clock.advance(0.001)
    assert cache.get("k") is None


def test_explicit_ttl_beats_the_default(clock: FakeClock) -> None:
    cache = make(clock, default_ttl=10)
    cache.set("k", "v", ttl=2)
    clock.advance(2)
    assert cache.get("k") is None


def test_entry_expires_exactly_at_expires_at(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("k", "v", ttl=5)
    clock.advance(4.5)
    assert cache.contains("k")
    clock.advance(0.5)  # now == expires_at
    assert not cache.contains("k")


@pytest.mark.parametrize("ttl", [-1, float("nan")])
def test_negative_or_nan_ttl_is_refused(clock: FakeClock, ttl: float) -> None:
    with pytest.raises(ValueError):
        make(clock).set("k", "v", ttl=ttl)
    with pytest.raises(ValueError):
        TtlCache(ttl)


def test_contains_and_in(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("k", "")
    assert cache.contains("k") and "k" in cache  # an empty value is still present
    assert "x" not in cache
    assert 5 not in cache


def test_erase_reports_whether_a_live_entry_was_removed(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("k", "v")
    assert cache.erase("k") is True
    assert cache.erase("k") is False
    cache.set("old", "v", ttl=1)
    clock.advance(1)
    assert cache.erase("old") is False


def test_clear_removes_everything(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("a", "1")
    cache.set("b", "2", ttl=5)
    cache.clear()
    assert cache.size() == 0 and cache.get("a") is None


def test_expired_entries_are_removed_lazily_on_access(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("k", "v", ttl=1)
    clock.advance(1)
    assert cache.get("k") is None
    assert cache.purge_expired() == 0  # the get already removed it


def test_size_purges_expired_entries_first(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("short", "v", ttl=1)
    cache.set("long", "v", ttl=100)
    cache.set("forever", "v")
    assert cache.size() == 3 == len(cache)
    clock.advance(1)
    assert cache.size() == 2
    assert cache.purge_expired() == 0  # size() already purged


def test_purge_expired_returns_how_many_it_removed(clock: FakeClock) -> None:
    cache = make(clock)
    for i in range(5):
        cache.set(f"k{i}", "v", ttl=i + 1)
    clock.advance(3)
    assert cache.purge_expired() == 3
    assert cache.purge_expired() == 0
    assert sorted(k for k in ("k0", "k1", "k2", "k3", "k4") if k in cache) == ["k3", "k4"]


def test_json_helpers_round_trip(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set_json("cfg", {"n": 1, "list": [1, 2.5, None, "x"]}, ttl=5)
    assert cache.get_json("cfg") == {"n": 1, "list": [1, 2.5, None, "x"]}
    assert cache.get("cfg") == '{"n":1,"list":[1,2.5,null,"x"]}'  # stored as compact JSON


def test_get_json_is_none_when_missing_expired_or_invalid(clock: FakeClock) -> None:
    cache = make(clock)
    assert cache.get_json("missing") is None
    cache.set_json("k", [1], ttl=1)
    clock.advance(1)
    assert cache.get_json("k") is None
    cache.set("bad", "{not json")
    assert cache.get_json("bad") is None
    assert cache.get_json("bad", default={}) == {}


def test_get_json_reads_bytes_values(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("b", b'{"a": 1}')
    assert cache.get_json("b") == {"a": 1}


def test_set_clock_replaces_the_time_source() -> None:
    cache = TtlCache()
    fake = FakeClock(0)
    cache.set_clock(fake)
    cache.set("k", "v", ttl=1)
    fake.advance(1)
    assert cache.get("k") is None


def test_default_clock_is_real_monotonic_time() -> None:
    cache = TtlCache()
    cache.set("k", "v", ttl=60)
    assert cache.get("k") == "v"


def test_a_custom_backend_receives_tagged_bytes_and_relative_ttls(clock: FakeClock) -> None:
    calls: list[tuple] = []

    class Recording(MemoryBackend):
        def set(self, key, value, ttl, now):
            calls.append(("set", key, value, ttl, now))
            super().set(key, value, ttl, now)

    backend: CacheBackend = Recording()
    cache = TtlCache(5, clock=clock, backend=backend)
    cache.set("k", "v")
    cache.set("b", b"\x00", ttl=1)
    assert calls == [("set", "k", b"sv", 5, 1000.0), ("set", "b", b"b\x00", 1, 1000.0)]
    other = TtlCache(clock=clock, backend=backend)  # two caches over one backend share entries
    assert other.get("k") == "v" and other.get("b") == b"\x00"


def test_forever_entries_reach_the_backend_with_no_ttl(clock: FakeClock) -> None:
    backend = MemoryBackend()
    TtlCache(clock=clock, backend=backend).set("k", "v")
    assert backend.purge(now=10**12) == (0, 1)


def test_memory_backend_keeps_forever_entries_on_purge() -> None:
    backend = MemoryBackend()
    backend.set("forever", b"v", None, now=0.0)
    backend.set("gone", b"v", 1.0, now=0.0)
    assert backend.purge(now=5.0) == (1, 1)
    assert backend.get("forever", now=10**12) == b"v"


def test_str_and_bytes_values_keep_their_type(clock: FakeClock) -> None:
    cache = make(clock)
    cache.set("s", "b-looking")
    cache.set("b", b"s-looking")
    assert cache.get("s") == "b-looking" and cache.get("b") == b"s-looking"
    cache.set("e", b"")
    assert cache.get("e") == b"" and cache.contains("e")


def test_concurrent_use_from_threads_is_consistent(clock: FakeClock) -> None:
    cache = make(clock)

    def worker(n: int) -> None:
        for i in range(500):
            cache.set(f"{n}:{i}", "v")
            assert cache.get(f"{n}:{i}") == "v"
            if i % 2:
                assert cache.erase(f"{n}:{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.size() == 8 * 250
