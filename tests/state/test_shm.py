"""Rings: records in, the same records out, in order, across wrap-around and across fork."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.shared.shm import RecordTooLarge, Ring, RingFull


def test_records_come_out_in_order_and_intact() -> None:
    ring = Ring(4096)
    for n in range(10):
        ring.try_put(bytes([n]) * n)
    assert ring.drain() == [bytes([n]) * n for n in range(10)]
    assert ring.try_get() is None


def test_a_record_over_the_limit_is_refused_with_a_clear_error() -> None:
    ring = Ring(4096, max_record=100)
    with pytest.raises(RecordTooLarge, match="101 bytes exceeds this ring's limit of 100"):
        ring.try_put(b"x" * 101)
    ring.try_put(b"x" * 100)


def test_a_full_ring_raises_ring_full_and_accepts_again_once_read() -> None:
    ring = Ring(256)
    put = 0
    with pytest.raises(RingFull, match="ring full"):
        while True:
            ring.try_put(b"y" * 20)
            put += 1
    assert put == 256 // 24
    assert ring.try_get() == b"y" * 20
    ring.try_put(b"z" * 20)


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.sampled_from([64, 72, 128, 200]),
    script=st.lists(st.tuples(st.booleans(), st.binary(max_size=28)), max_size=200),
)
def test_wrap_around_never_loses_reorders_or_corrupts(
    capacity: int, script: list[tuple[bool, bytes]]
) -> None:
    ring = Ring(capacity, max_record=28)
    expected: list[bytes] = []
    for is_put, payload in script:
        if is_put:
            try:
                ring.try_put(payload)
            except RingFull:
                assert ring.free_bytes() < len(payload) + 4 + capacity // 2
                continue
            expected.append(payload)
        else:
            got = ring.try_get()
            assert got == (expected.pop(0) if expected else None)
    assert ring.drain() == expected


def test_the_eventfd_wakes_a_waiting_reader_only() -> None:
    ring = Ring(4096)
    assert ring.prepare_wait()
    ring.try_put(b"a")
    assert os.eventfd_read(ring.notify_fd) == 1
    ring.try_put(b"b")  # the reader did not announce a wait again: no syscall, no wake-up
    with pytest.raises(BlockingIOError):
        os.eventfd_read(ring.notify_fd)
    assert not ring.prepare_wait()  # records are waiting: do not sleep


def test_a_ring_made_before_fork_carries_records_between_processes() -> None:
    up, down = Ring(1 << 16), Ring(1 << 16)
    pid = os.fork()
    if pid == 0:  # child: echo 1000 records back, reversed
        status = 1
        try:
            seen = 0
            while seen < 1000:
                record = up.try_get()
                if record is None:
                    continue
                while True:
                    try:
                        down.try_put(record[::-1])
                        break
                    except RingFull:
                        pass
                seen += 1
            status = 0
        finally:
            os._exit(status)
    sent = [f"record {n}".encode() * (n % 7 + 1) for n in range(1000)]
    got: list[bytes] = []
    pending = list(sent)
    while len(got) < len(sent):
        while pending:
            try:
                up.try_put(pending[0])
            except RingFull:
                break
            pending.pop(0)
        got += down.drain()
    assert got == [s[::-1] for s in sent]
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
