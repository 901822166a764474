"""The shared table and the store on it: same answers as the engine, across processes and
through a worker killed at the worst moment."""

from __future__ import annotations

import os
import signal
import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.shared.kvstore import KeyValueStore
from workers.shared.link import StateError
from workers.shared.state import LocalState
from workers.shared.table import (
    _GROUP,
    _GROUP_HEAD,
    _HEADER,
    _SLOT,
    GROUP_SLOTS,
    HALF,
    SLOT_DATA,
    SharedTable,
)
from workers.shared.table_store import TableStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_store(groups: int = 2, clock: Clock | None = None) -> tuple[TableStore, LocalState]:
    """A store on a small table (so groups fill up and spill) and its overflow store."""
    clock = clock or Clock()
    overflow = LocalState(KeyValueStore(clock))
    return TableStore(SharedTable(groups=groups, stripes=2), overflow, clock), overflow


def in_child(body: Callable[[], object]) -> int:
    """Run ``body()`` in a forked child; its exit status (0 when it returned)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


# -- the same answers as the engine --------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "sess:1", "sess:2", "rl:x", "k" * 200])
VALUES = st.one_of(
    st.binary(max_size=40),
    st.binary(min_size=SLOT_DATA - 10, max_size=SLOT_DATA + 40),  # around the slot limit
    st.sampled_from([b"7", b"-3", b"x"]),
)
BUCKETS = [(1.0, 2.0), (3.0, 0.0), (3.0, 2.0)]  # (capacity, refill per second)
TTLS = st.one_of(st.none(), st.sampled_from([0.5, 5.0, 60.0]))
OPS = st.one_of(
    st.tuples(st.just("set"), KEYS, VALUES, TTLS),
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("delete"), KEYS),
    st.tuples(st.just("incr"), KEYS, st.integers(-5, 5), TTLS),
    st.tuples(st.just("take"), KEYS),
    st.tuples(st.just("sleep"), st.sampled_from([0.1, 0.6, 3.0, 100.0])),
    st.tuples(st.just("count_prefix"), st.sampled_from(["", "sess:", "k"])),
    st.tuples(st.just("clear_prefix"), st.sampled_from(["sess:", "rl:"])),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(OPS, max_size=60), groups=st.sampled_from([1, 2, 64]))
def test_the_table_store_answers_like_the_engine_whatever_fits_or_spills(
    ops: list[tuple], groups: int
) -> None:
    clock = Clock()
    store, _ = make_store(groups, clock)
    model = LocalState(KeyValueStore(clock))
    for op, *args in ops:
        if op == "sleep":
            clock.now += args[0]
            continue
        if op == "take":  # one limiter per key: the same capacity and rate on every call
            args += BUCKETS[len(args[0]) % len(BUCKETS)]
        outcomes = []
        for target in (store, model):
            try:
                outcomes.append(("ok", getattr(target, op)(*args)))
            except StateError as exc:
                outcomes.append(("error", str(exc)))
        assert outcomes[0] == outcomes[1], (op, args)


def test_a_value_that_does_not_fit_lives_in_the_master_until_a_small_one_replaces_it() -> None:
    store, overflow = make_store(groups=64)
    store.set("page", b"x" * (SLOT_DATA + 1), ttl=60)
    assert overflow.get("page") == b"x" * (SLOT_DATA + 1)
    assert store.get("page") == b"x" * (SLOT_DATA + 1)
    store.set("page", b"small", ttl=60)
    assert store.get("page") == b"small"
    assert overflow.get("page") is None  # one place per key: no stale copy to resurface
    assert store.delete("page") and store.get("page") is None


def test_a_full_group_spills_and_every_key_stays_reachable() -> None:
    store, overflow = make_store(groups=1)  # 16 slots in all
    for n in range(40):
        store.set(f"k{n}", str(n).encode())
    assert store.table.any_spilled
    assert overflow.count_prefix("k") == 40 - 16
    assert [store.get(f"k{n}") for n in range(40)] == [str(n).encode() for n in range(40)]
    assert store.count_prefix("k") == 40
    assert store.clear_prefix("k") == 40
    assert store.get("k3") is None


def test_expired_slots_are_reused_without_spilling() -> None:
    clock = Clock()
    store, _ = make_store(groups=1, clock=clock)
    for round_ in range(5):
        for n in range(16):
            store.set(f"r{round_}:{n}", b"v", ttl=1)
        clock.now += 2
    assert not store.table.any_spilled


# -- across processes ----------------------------------------------------------------------


def test_increments_from_two_processes_are_never_lost() -> None:
    store, _ = make_store(groups=64)

    def count() -> None:
        for _ in range(3000):
            store.incr("hits")

    children = [os.fork() for _ in range(1)]
    if children[0] == 0:
        try:
            count()
        finally:
            os._exit(0)
    count()
    assert os.waitpid(children[0], 0)[1] == 0
    assert store.get("hits") == b"6000"


def test_a_bucket_shared_by_two_processes_gives_its_capacity_once() -> None:
    store, _ = make_store(groups=64)
    read, write = os.pipe()

    def take_all() -> None:
        allowed = sum(store.take("ip", 500, 0.0)[0] for _ in range(700))
        os.write(write, struct.pack("<I", allowed))

    pid = os.fork()
    if pid == 0:
        try:
            take_all()
        finally:
            os._exit(0)
    take_all()
    os.waitpid(pid, 0)
    counts = struct.unpack("<II", os.read(read, 8))
    assert sum(counts) == 500


def test_a_reader_never_sees_a_torn_value_while_another_process_writes() -> None:
    store, _ = make_store(groups=64)
    values = [bytes([65 + n]) * (1 + n * 9) for n in range(20)]  # each one byte repeated
    store.set("v", values[0])
    pid = os.fork()
    if pid == 0:
        try:
            for n in range(20000):
                store.set("v", values[n % 20])
        finally:
            os._exit(0)
    seen = set()
    while not os.waitpid(pid, os.WNOHANG)[0]:
        value = store.get("v")
        assert value in values
        seen.add(value)
    assert len(seen) > 1


def test_a_worker_killed_holding_the_lock_mid_write_leaves_the_old_value_and_a_free_lock() -> None:
    store, _ = make_store(groups=64)
    store.set("sess:x", b"committed")
    table = store.table
    home, tag = table.locate(b"sess:x")
    entry = table.find(home, tag, b"sess:x")
    assert entry is not None
    group_at = _HEADER + (home // GROUP_SLOTS) * _GROUP
    slot = group_at + _GROUP_HEAD + entry[0] * _SLOT
    spare_half = slot + 8 + (table.words[slot >> 3] ^ 1) * HALF

    def die_mid_write() -> None:
        table.lock(home)
        table.words[group_at >> 3] += 1  # a writer's first step: readers must read again...
        table.mem[spare_half : spare_half + 100] = b"\xee" * 100  # ...half a write...
        os.kill(os.getpid(), signal.SIGKILL)  # ...and nothing after

    status = in_child(die_mid_write)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert store.get("sess:x") == b"committed"  # the reader takes over the dead owner's lock
    store.set("sess:x", b"next")
    assert store.get("sess:x") == b"next"
    assert store.incr("n") == 1


def test_a_greenlet_holding_the_lock_keeps_the_other_greenlets_of_its_process_out() -> None:
    import gevent

    store, _ = make_store(groups=64)
    store.table.pause = gevent.sleep  # as a worker's link sets it
    order: list[str] = []
    home, _tag = store.table.locate(b"x")

    def holder() -> None:
        with store.table.hold(home):
            order.append("held")
            gevent.sleep(0.05)  # a round trip to the master
            order.append("released")

    def writer() -> None:
        store.set("x", b"1")
        order.append("written")

    gevent.joinall([gevent.spawn(holder), gevent.spawn(writer)], raise_error=True)
    assert order == ["held", "released", "written"]


def test_a_table_made_before_fork_is_shared_with_the_child() -> None:
    store, _ = make_store(groups=64)
    assert in_child(lambda: store.set("from-child", b"hello", ttl=60)) == 0
    assert store.get("from-child") == b"hello"


def test_bad_arguments_are_refused_with_the_stores_errors() -> None:
    store, _ = make_store()
    with pytest.raises(TypeError, match="bytes"):
        store.set("a", "text")  # type: ignore[arg-type]
    with pytest.raises(StateError, match="ttl"):
        store.set("a", b"1", ttl=0)
    store.set("a", b"x")
    with pytest.raises(StateError, match="not an integer"):
        store.incr("a")
    with pytest.raises(ValueError, match="power of two"):
        SharedTable(groups=3)
