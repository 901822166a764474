"""The shared heartbeat table: records survive fork and a child's writes reach the parent."""

from __future__ import annotations

import os
import time

import pytest

from workers.supervise.heartbeat import HeartbeatTable

pytestmark = pytest.mark.timeout(10)


def test_allocate_resets_the_record_to_now() -> None:
    table = HeartbeatTable(capacity=4)
    before = time.monotonic()
    index = table.allocate()
    record = table.read(index)
    assert before <= record.last_beat <= time.monotonic()
    assert (record.requests, record.pid, record.ready, record.retiring) == (0, 0, False, False)


def test_records_are_reused_after_release_and_the_table_can_fill_up() -> None:
    table = HeartbeatTable(capacity=2)
    first, second = table.allocate(), table.allocate()
    assert first != second
    with pytest.raises(LookupError):
        table.allocate()
    table.mark_ready(first)
    table.release(first)
    again = table.allocate()
    assert again == first
    assert not table.read(again).ready  # reset for the new owner


def test_a_forked_child_writes_are_visible_to_the_parent() -> None:
    table = HeartbeatTable(capacity=8)
    index = table.allocate()
    other = table.allocate()
    pid = os.fork()
    if pid == 0:  # the child writes only its own record, like a worker
        try:
            table.set_pid(index, os.getpid())
            table.set_requests(index, 42)
            table.mark_ready(index)
            table.request_retire(index)
            table.beat(index)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    record = table.read(index)
    assert (record.pid, record.requests, record.ready, record.retiring) == (pid, 42, True, True)
    assert record.last_beat <= time.monotonic()
    assert table.read(other).pid == 0  # neighbours untouched
