"""The shared table and the store on it: same answers as the engine, across processes and
through a worker killed at the worst moment; bounded by eviction, swept of expired keys."""

from __future__ import annotations

import json
import math
import os
import signal
import struct
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.shared.kvstore import ENTRY_OVERHEAD, KeyValueStore
from workers.shared.link import StateError
from workers.shared.state import LocalState
from workers.shared.table import GROUP_SLOTS, SLOT_DATA, SharedTable, groups_for
from workers.shared.table_layout import GROUP_HEAD
from workers.shared.table_store import TableStore
from workers.shared.table_upkeep import select, sweep

pytestmark = pytest.mark.slow

SMALL, MEDIUM, LARGE = SLOT_DATA


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_store(
    groups: tuple[int, int, int] = (2, 1, 1), clock: Clock | None = None
) -> tuple[TableStore, LocalState]:
    """A store on a small table (so groups fill up) and its overflow store."""
    clock = clock or Clock()
    overflow = LocalState(KeyValueStore(clock))
    return TableStore(SharedTable(groups=groups, stripes=2), overflow, clock), overflow


@pytest.fixture
def store() -> Iterator[TableStore]:
    made, _ = make_store((64, 16, 4))
    yield made
    made.table.close()


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


def class_of(store: TableStore, key: str) -> int:
    found = store.table.find(store.table.place(key.encode()))
    assert found is not None, key
    return found.size_class


# -- the same answers as the engine --------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "sess:1", "sess:2", "rl:x", "k" * 200])
VALUES = st.one_of(
    st.binary(max_size=40),
    st.integers(SMALL - 210, SMALL + 10).map(lambda n: b"s" * n),  # around each class's limit
    st.integers(MEDIUM - 210, MEDIUM + 10).map(lambda n: b"m" * n),
    st.integers(LARGE - 210, LARGE + 10).map(lambda n: b"l" * n),  # and past the largest
    st.sampled_from([b"7", b"-3", b"x"]),
)
BUCKETS = [(1.0, 2.0), (3.0, 0.0), (3.0, 2.0)]  # (capacity, refill per second)
TTLS = st.one_of(st.none(), st.sampled_from([0.5, 5.0, 60.0]))
EXPECTED = st.one_of(st.none(), st.sampled_from([b"7", b"x", b"s" * 40]))
OPS = st.one_of(
    st.tuples(st.just("set"), KEYS, VALUES, TTLS),
    st.tuples(st.just("compare_and_set"), KEYS, EXPECTED, VALUES, TTLS),
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("delete"), KEYS),
    st.tuples(st.just("incr"), KEYS, st.integers(-5, 5), TTLS),
    st.tuples(st.just("take"), KEYS),
    st.tuples(st.just("sleep"), st.sampled_from([0.1, 0.6, 3.0, 100.0])),
    st.tuples(st.just("count_prefix"), st.sampled_from(["", "sess:", "k"])),
    st.tuples(st.just("clear_prefix"), st.sampled_from(["sess:", "rl:"])),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(OPS, max_size=60), groups=st.sampled_from([(1, 1, 1), (64, 16, 4)]))
def test_the_table_store_answers_like_the_engine_in_every_class_or_spilled(
    ops: list[tuple], groups: tuple[int, int, int]
) -> None:
    # Six keys and their buckets never fill a group of 16, so nothing is evicted here.
    clock = Clock()
    store, _ = make_store(groups, clock)
    model = LocalState(KeyValueStore(clock))
    try:
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
    finally:
        store.table.close()


def test_a_session_of_4_kib_stays_in_the_table_and_moves_between_classes(
    store: TableStore,
) -> None:
    for size, size_class in ((100, 0), (1000, 1), (4096, 2), (500, 2), (SMALL - 20, 2)):
        store.set("sess:x", b"v" * size, ttl=60)  # a value that shrinks keeps its slot
        assert class_of(store, "sess:x") == size_class
        assert store.get("sess:x") == b"v" * size
    assert not store.table.any_spilled
    store.delete("sess:x")
    store.set("sess:x", b"v" * 5, ttl=60)
    assert class_of(store, "sess:x") == 0


def test_a_value_that_does_not_fit_lives_in_the_master_until_a_small_one_replaces_it() -> None:
    store, overflow = make_store((64, 16, 4))
    big = b"x" * (LARGE + 1)
    store.set("page", big, ttl=60)
    assert overflow.get("page") == big
    assert store.get("page") == big
    assert store.compare_and_set("page", big, b"small", ttl=60)
    assert store.get("page") == b"small"
    assert overflow.get("page") is None  # one place per key: no stale copy to resurface
    assert store.delete("page") and store.get("page") is None


def test_groups_full_of_values_without_a_ttl_spill_and_every_key_stays_reachable() -> None:
    store, overflow = make_store((1, 1, 1))  # 16 slots per class, 48 in all
    for n in range(60):
        store.set(f"k{n}", str(n).encode())
    assert store.table.any_spilled
    assert overflow.count_prefix("k") == 60 - 3 * GROUP_SLOTS
    assert [store.get(f"k{n}") for n in range(60)] == [str(n).encode() for n in range(60)]
    assert store.count_prefix("k") == 60
    assert store.clear_prefix("k") == 60
    assert store.get("k3") is None


def test_values_without_a_ttl_that_fit_nowhere_are_refused_with_a_clear_error() -> None:
    clock = Clock()
    overflow = LocalState(KeyValueStore(clock, max_bytes=4 * (3 + 1 + ENTRY_OVERHEAD)))
    store = TableStore(SharedTable(groups=(1, 1, 1), stripes=1), overflow, clock)
    for n in range(3 * GROUP_SLOTS + 4):  # every slot of the table, then the master's room
        store.set(f"k{n:02}", b"v")
    with pytest.raises(StateError, match="full"):
        store.set("one-more", b"v")
    with pytest.raises(StateError, match="full"):
        store.set("one-more", b"v", ttl=60)  # nothing with a TTL anywhere to make room
    assert store.get("k00") == b"v" and store.get("k51") == b"v"
    assert store.delete("k51")
    store.set("k99", b"v", ttl=60)  # the room of the one deleted
    store.set("k98", b"v", ttl=60)  # evicts k99, the master's only entry with a TTL
    assert store.get("k99") is None and store.get("k98") == b"v"


def test_a_full_table_demotes_the_entries_written_longest_ago_to_the_master_losing_none() -> None:
    clock = Clock()
    store, overflow = make_store((1, 1, 1), clock)  # 16 slots per class, 48 in all
    for n in range(60):
        store.set(f"s{n}", b"x", ttl=3600)
        clock.now += 1
    in_master = [n for n in range(60) if overflow.get(f"s{n}") is not None]
    assert in_master == list(range(12))  # moved there, oldest first, to make room
    for n in range(12):  # marked where the readers of each look: its class-0 group
        place = store.table.place(f"s{n}".encode())
        assert store.table.layout.spilled_word(place.key) == place.seqs[0] + 1
        assert store.table.spilled(place)
    assert all(class_of(store, f"s{n}") in (0, 1, 2) for n in range(12, 60))  # the newest
    assert all(store.get(f"s{n}") == b"x" for n in range(60))  # nothing lost
    assert store.count_prefix("s") == 60


def test_a_session_created_after_a_flood_is_served_from_the_table() -> None:
    clock = Clock()
    store, overflow = make_store((1, 1, 1), clock)
    for n in range(200):  # anonymous visitors: the table fills, the rest goes to the master
        store.set(f"anon:{n}", b"a" * 300, ttl=3600)
        clock.now += 0.01
    store.set("hot", b"h" * 300, ttl=3600)
    assert class_of(store, "hot") == 1 and overflow.get("hot") is None
    for _ in range(100):  # the hot user's requests are never demoted by each other
        assert store.compare_and_set("hot", b"h" * 300, b"h" * 300, ttl=3600)
    assert overflow.get("hot") is None
    assert store.count_prefix("anon:") == 200


def test_a_demoted_entry_keeps_its_ttl_and_kind_in_the_master() -> None:
    clock = Clock()
    store, overflow = make_store((1, 1, 1), clock)
    store.set("early", b"e", ttl=100)
    store.incr("count", 5, ttl=100)
    clock.now += 1
    for n in range(3 * GROUP_SLOTS):
        store.set(f"late{n}", b"v", ttl=3600)
    assert overflow.get("early") == b"e" and overflow.get("count") == b"5"  # both moved
    assert store.get("early") == b"e" and store.incr("count") == 6
    clock.now += 98.5  # 99.5 s after they were written
    assert store.get("early") == b"e" and store.get("count") == b"6"
    clock.now += 1  # their TTL is over in the master as it would have been in the table
    assert store.get("early") is None and store.get("count") is None
    assert store.get("late0") == b"v"


def test_a_demoted_session_written_again_is_promoted_back_into_the_table() -> None:
    clock = Clock()
    store, overflow = make_store((1, 1, 1), clock)
    for n in range(3 * GROUP_SLOTS + 1):
        store.set(f"s{n}", b"x", ttl=3600)
        clock.now += 1
    assert overflow.get("s0") == b"x"  # demoted
    assert store.compare_and_set("s0", b"x", b"y", ttl=3600)  # its user comes back
    assert class_of(store, "s0") == 0 and overflow.get("s0") is None  # one place per key
    assert overflow.get("s1") == b"x"  # the next oldest made room
    assert store.get("s0") == b"y" and store.get("s1") == b"x"


def test_values_with_a_ttl_are_demoted_before_values_without_one() -> None:
    clock = Clock()
    store, overflow = make_store((1, 1, 1), clock)
    for n in range(3 * GROUP_SLOTS - 1):
        store.set(f"config{n}", b"c")  # no TTL, written first
        clock.now += 1
    store.set("session", b"s", ttl=3600)
    clock.now += 1
    store.set("newcomer", b"n", ttl=3600)
    assert overflow.get("session") == b"s" and overflow.count_prefix("config") == 0
    store.set("another", b"n", ttl=3600)  # now the oldest value with a TTL is newcomer
    assert overflow.get("newcomer") == b"n" and overflow.count_prefix("config") == 0


def test_buckets_stay_in_the_table_while_values_make_room_for_them() -> None:
    clock = Clock()
    store, overflow = make_store((1, 1, 1), clock)
    for n in range(3 * GROUP_SLOTS + 5):  # every slot taken, some values demoted
        store.set(f"v{n}", b"x", ttl=3600)
        clock.now += 1
    assert store.take("rl:a", 2, 0.0).allowed and store.take("rl:a", 2, 0.0).allowed
    assert not store.take("rl:a", 2, 0.0).allowed  # one bucket, kept in the table
    assert overflow.take("rl:a", 2, 0.0).allowed  # the master never had it
    for n in range(3 * GROUP_SLOTS):  # values written after the bucket do not demote it
        store.set(f"w{n}", b"x", ttl=3600)
        clock.now += 1
    assert not store.take("rl:a", 2, 0.0).allowed
    assert store.count_prefix("") == 3 * GROUP_SLOTS * 2 + 5


@pytest.mark.parametrize("size", [150, 600])
def test_30000_logins_keep_every_session_until_its_ttl(size: int) -> None:
    clock = Clock()
    store = TableStore(SharedTable(), LocalState(KeyValueStore(clock)), clock)
    value = b"s" * size
    for n in range(30_000):
        store.set(f"sess:{n:032x}", value, ttl=3600)
    assert sum(store.get(f"sess:{n:032x}") is None for n in range(30_000)) == 0
    clock.now += 3601
    assert store.get("sess:" + "0" * 32) is None  # gone at its TTL


def test_expired_slots_are_reused_without_spilling() -> None:
    clock = Clock()
    store, _ = make_store((1, 1, 1), clock=clock)
    for round_ in range(5):
        for n in range(48):
            store.set(f"r{round_}:{n}", b"v")
        clock.now += 2
        store.clear_prefix(f"r{round_}:")
    for n in range(20):
        store.set(f"t:{n}", b"v", ttl=1)
    clock.now += 2
    for n in range(20):
        store.set(f"u:{n}", b"v")
    assert not store.table.any_spilled


def test_the_sweep_frees_expired_entries_and_shortens_probes(store: TableStore) -> None:
    clock = Clock()
    swept, _ = make_store((1, 1, 1), clock)
    table = swept.table
    for n in range(GROUP_SLOTS - 1):
        swept.set(f"e{n}", b"v", ttl=5)
    swept.set("live", b"v", ttl=60)  # the group's last slot
    clock.now += 10
    assert sweep(table, clock.now, 0, 1) == 1  # one group per call here
    assert sweep(table, clock.now, 1, 100) == 0  # the rest: every group visited
    place = table.place(b"live")
    group_tags = table.words[place.seqs[0] + 2 : place.seqs[0] + 2 + GROUP_SLOTS]
    assert sum(1 for tag in group_tags if tag & 1) == 1  # only the live key is left
    assert swept.get("live") == b"v" and swept.count_prefix("") == 1
    assert swept.delete("live")
    sweep(table, clock.now, 0, 100)
    assert not any(table.words[place.seqs[0] + 2 : place.seqs[0] + 2 + GROUP_SLOTS])
    assert select(table, lambda stored: True) == []


def test_groups_for_sizes_each_class_to_a_share_of_the_megabytes() -> None:
    assert groups_for(103) == (4096, 1024, 256) == SharedTable.__init__.__defaults__[0]
    small = SharedTable(groups_for(6), stripes=32)
    assert small.groups == (128, 32, 8) and small.stripes == 8
    assert small.size <= 6 << 20
    small.close()
    with pytest.raises(ValueError, match="positive"):
        groups_for(0)


def test_compare_and_set_writes_only_over_the_expected_value(store: TableStore) -> None:
    assert store.compare_and_set("c", None, b"first", ttl=60)
    assert not store.compare_and_set("c", None, b"again", ttl=60)
    assert not store.compare_and_set("c", b"other", b"again", ttl=60)
    assert store.compare_and_set("c", b"first", b"m" * 900, ttl=60)  # and moves class
    assert store.get("c") == b"m" * 900
    store.incr("n", 5)
    assert store.compare_and_set("n", b"5", b"6")  # a counter compares as its digits
    assert store.incr("n") == 7


# -- across processes ----------------------------------------------------------------------


def test_writers_of_one_key_racing_its_demotion_and_promotion_lose_no_write() -> None:
    # Two workers update their own field of one ~2 KiB session (read, then compare-and-set,
    # as sessions do) while a third floods the 16 slots of the 4 KiB class that alone holds
    # it, so the session is demoted to the real master's store and promoted back again and
    # again between and during their writes.
    from workers.shared.link import Link
    from workers.shared.state import StateClient
    from workers.shared.state_server import StateServer

    size = 2000

    def write(store: TableStore, name: str) -> None:
        import gevent

        place = store.table.place(b"hot")
        done = misses = 0
        while done < 200 or (not misses and done < 5000):
            while True:
                misses += store.table.read(place) is None  # demoted meanwhile
                raw = store.get("hot")
                data = json.loads(raw) if raw else {}
                data[name] = data.get(name, 0) + 1
                value = json.dumps(data).ljust(size).encode()
                if store.compare_and_set("hot", raw, value, ttl=60):
                    break
            done += 1
            gevent.sleep(0.001)  # the flood's turn
        store.set(f"{name}:done", json.dumps([done, misses]).encode(), ttl=60)
        store.incr("finished", ttl=60)

    def flood(store: TableStore) -> None:
        n = 0
        while n % 16 or store.get("finished") != b"2":
            store.set(f"flood{n}", b"f" * size, ttl=60)
            n += 1

    server = StateServer(table=SharedTable(groups=(1, 1, 1), stripes=1))
    server.start()
    assert server.table is not None
    try:
        pids = []
        for record, role in enumerate(["w0", "w1", "flood"]):
            endpoint = server.attach(record)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    store = TableStore(server.table, StateClient(Link(endpoint)))
                    flood(store) if role == "flood" else write(store, role)
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        assert [os.waitpid(pid, 0)[1] for pid in pids] == [0, 0, 0]
        both = TableStore(server.table, LocalState(server.store))
        final = json.loads(both.get("hot") or b"{}")
        reports = {name: json.loads(both.get(f"{name}:done") or b"[0, 0]") for name in final}
        assert {name: final[name] for name in ("w0", "w1")} == {
            name: reports[name][0] for name in ("w0", "w1")
        }
        assert sum(misses for _, misses in reports.values()) > 0  # the race was run
    finally:
        server.stop()


def test_increments_from_two_processes_are_never_lost(store: TableStore) -> None:
    def count() -> None:
        for _ in range(3000):
            store.incr("hits")

    pid = os.fork()
    if pid == 0:
        try:
            count()
        finally:
            os._exit(0)
    count()
    assert os.waitpid(pid, 0)[1] == 0
    assert store.get("hits") == b"6000"


def test_compare_and_set_retries_from_two_processes_lose_no_update(store: TableStore) -> None:
    padding = b"p" * 700  # a medium-class value: the session case

    def add(times: int) -> None:
        for _ in range(times):
            while True:
                current = store.get("doc")
                assert current is not None
                count = int(current.split(b";")[0])
                if store.compare_and_set("doc", current, b"%d;%s" % (count + 1, padding)):
                    break

    store.set("doc", b"0;" + padding)
    pid = os.fork()
    if pid == 0:
        try:
            add(2000)
        finally:
            os._exit(0)
    add(2000)
    assert os.waitpid(pid, 0)[1] == 0
    assert store.get("doc") == b"4000;" + padding


def test_a_bucket_shared_by_two_processes_gives_its_capacity_once(store: TableStore) -> None:
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


def test_a_reader_never_sees_a_torn_value_while_another_process_writes(
    store: TableStore,
) -> None:
    values = [bytes([65 + n]) * (1 + n * 225) for n in range(20)]  # every class
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
        assert value in values  # never torn, never missing
        seen.add(value)
    assert len(seen) > 3


def test_a_reader_never_misses_a_key_while_it_moves_to_larger_classes() -> None:
    store, _ = make_store((64, 64, 64))  # room for every key in every class
    sizes = (10, 900, 4000)  # classes 0, 1 and 2

    def grow() -> None:
        for n in range(300):
            key = f"g{n}"
            store.set(key, b"s" * sizes[0])
            store.set("created", b"%d" % n)  # from now on the key is always there...
            for size in sizes[1:]:
                store.set(key, b"x" * size)  # ...while it moves up a class, twice

    store.set("created", b"-1")
    pid = os.fork()
    if pid == 0:
        try:
            grow()
        finally:
            os._exit(0)
    looks = 0
    while not os.waitpid(pid, os.WNOHANG)[0]:
        newest = int(store.get("created") or b"-1")
        for _ in range(20 if newest >= 0 else 0):
            value = store.get(f"g{newest}")  # the key the writer is moving right now
            assert value is not None and len(value) in sizes
            looks += 1
    assert looks
    store.table.close()


def test_a_worker_killed_holding_the_lock_mid_write_leaves_the_old_value_and_a_free_lock(
    store: TableStore,
) -> None:
    store.set("sess:x", b"committed")
    table = store.table
    place = table.place(b"sess:x")
    entry = table.find(place)
    assert entry is not None
    layout = table.classes[entry.size_class]
    seq_at = place.seqs[entry.size_class]
    slot = (seq_at << 3) + GROUP_HEAD + entry.slot * layout.slot
    spare_half = slot + 8 + (table.words[slot >> 3] ^ 1) * layout.half

    def die_mid_write() -> None:
        table.locked(place).__enter__()
        table.words[seq_at] += 1  # a writer's first step: readers must read again...
        table.mem[spare_half : spare_half + 100] = b"\xee" * 100  # ...half a write...
        os.kill(os.getpid(), signal.SIGKILL)  # ...and nothing after

    status = in_child(die_mid_write)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert store.get("sess:x") == b"committed"  # the reader takes over the dead owner's lock
    store.set("sess:x", b"next")
    assert store.get("sess:x") == b"next"
    assert store.incr("n") == 1


def test_a_worker_killed_mid_move_leaves_one_whole_copy(store: TableStore) -> None:
    store.set("sess:y", b"small")
    table = store.table
    place = table.place(b"sess:y")

    def die_mid_move() -> None:
        # What `put` does to move the key to the medium class, cut short before the old
        # copy is removed: both groups odd, the new copy written and tagged.
        table.locked(place).__enter__()
        table.words[place.seqs[1]] += 1
        table.words[place.seqs[0]] += 1
        words = table.words
        layout = table.classes[1]
        slot = (place.seqs[1] << 3) + GROUP_HEAD + place.first * layout.slot
        half = slot + 8 + (words[slot >> 3] ^ 1) * layout.half
        head = struct.pack("<dBBHf", math.inf, 0, len(place.key), 600, 0.0)
        table.mem[half : half + 16 + len(place.key) + 600] = head + place.key + b"n" * 600
        words[slot >> 3] ^= 1
        words[place.seqs[1] + 2 + place.first] = place.tag
        os.kill(os.getpid(), signal.SIGKILL)

    status = in_child(die_mid_move)
    assert os.WIFSIGNALED(status)
    assert store.get("sess:y") == b"small"  # repaired: the copy in the smaller class stays
    assert store.delete("sess:y")
    assert store.get("sess:y") is None  # and no second copy resurfaces


def test_a_worker_killed_reusing_an_expired_slot_leaves_no_entry_under_another_keys_tag() -> None:
    clock = Clock()
    store, _ = make_store((1, 1, 1), clock)
    for n in range(GROUP_SLOTS):
        store.set(f"old{n}", b"v", ttl=60)
    clock.now += 61  # every slot of the group expired, none freed yet
    table = store.table
    place = table.place(b"newcomer")
    victim = table.find(table.place(b"old0"))
    assert victim is not None

    def die_mid_eviction() -> None:
        # What `put` does to give old0's expired slot to "newcomer", cut short before the tag.
        table.locked(place).__enter__()
        table.words[place.seqs[0]] += 1
        layout = table.classes[0]
        slot = (place.seqs[0] << 3) + GROUP_HEAD + victim.slot * layout.slot
        half = slot + 8 + (table.words[slot >> 3] ^ 1) * layout.half
        entry = struct.pack("<dBBHf", math.inf, 0, len(place.key), 1, 0.0) + place.key + b"n"
        table.mem[half : half + len(entry)] = entry
        table.words[slot >> 3] ^= 1
        os.kill(os.getpid(), signal.SIGKILL)

    assert os.WIFSIGNALED(in_child(die_mid_eviction))
    assert store.get("newcomer") is None  # repaired on the way: the write never happened
    assert [stored.key for stored in select(table, lambda s: s.key == b"newcomer")] == []
    assert store.count_prefix("old") == 0  # expired, all of them
    assert table.find(table.place(b"old1")) is not None  # but still in their slots
    store.set("newcomer", b"n", ttl=60)
    assert store.get("newcomer") == b"n" and store.count_prefix("newcomer") == 1


def test_a_greenlet_holding_the_lock_keeps_the_other_greenlets_of_its_process_out(
    store: TableStore,
) -> None:
    import gevent

    store.table.pause = gevent.sleep  # as a worker's link sets it
    order: list[str] = []
    place = store.table.place(b"x")

    def holder() -> None:
        with store.table.locked(place):
            order.append("held")
            gevent.sleep(0.05)  # a round trip to the master
            order.append("released")

    def writer() -> None:
        store.set("x", b"1")
        order.append("written")

    gevent.joinall([gevent.spawn(holder), gevent.spawn(writer)], raise_error=True)
    assert order == ["held", "released", "written"]


def test_a_table_made_before_fork_is_shared_with_the_child(store: TableStore) -> None:
    assert in_child(lambda: store.set("from-child", b"hello" * 300, ttl=60)) == 0
    assert store.get("from-child") == b"hello" * 300


def test_bad_arguments_are_refused_with_the_stores_errors() -> None:
    store, _ = make_store()
    with pytest.raises(TypeError, match="bytes"):
        store.set("a", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        store.compare_and_set("a", None, "text")  # type: ignore[arg-type]
    with pytest.raises(StateError, match="ttl"):
        store.set("a", b"1", ttl=0)
    store.set("a", b"x")
    with pytest.raises(StateError, match="not an integer"):
        store.incr("a")
    with pytest.raises(ValueError, match="powers of two"):
        SharedTable(groups=(3, 1, 1))
    with pytest.raises(ValueError, match="each of the 3"):
        SharedTable(groups=(4,))
