"""WorkerContext semantics a server relies on (in-process, gevent hub, no fork)."""

from __future__ import annotations

import os

import gevent
import pytest

from workers.supervise.context import WorkerContext
from workers.supervise.heartbeat import HeartbeatTable

pytestmark = pytest.mark.timeout(10)


def make_context(**kwargs: object) -> WorkerContext:
    options: dict[str, object] = {
        "worker_id": 0,
        "generation": 1,
        "sockets": [],
        "graceful_timeout": 2.0,
    }
    options.update(kwargs)
    return WorkerContext(**options)  # type: ignore[arg-type]


def test_stop_runs_callbacks_once_then_wakes_waiters() -> None:
    ctx = make_context()
    calls: list[str] = []
    ctx.on_stop(lambda: calls.append(f"callback stopping={ctx.stopping}"))
    waiter = gevent.spawn(lambda: ctx.wait_stop(5))
    gevent.sleep(0)
    assert ctx.request_stop(graceful=True)
    assert waiter.get(timeout=1) is True
    assert calls == ["callback stopping=False"]  # listeners close before waiters run
    assert ctx.stopping and ctx.graceful
    assert not ctx.request_stop(graceful=True)
    assert calls == ["callback stopping=False"]


def test_on_stop_after_the_stop_runs_at_once_and_a_failing_callback_is_contained() -> None:
    ctx = make_context()
    ctx.on_stop(lambda: 1 / 0)
    ctx.request_stop(graceful=False)
    ran: list[bool] = []
    ctx.on_stop(lambda: ran.append(True))
    assert ran == [True]
    assert not ctx.graceful


def test_an_immediate_stop_overrides_a_graceful_one() -> None:
    ctx = make_context()
    ctx.request_stop(graceful=True)
    assert ctx.request_stop(graceful=False)
    assert not ctx.graceful
    assert not ctx.request_stop(graceful=True)  # never back to graceful
    assert not ctx.graceful


def test_wait_stop_times_out_cooperatively() -> None:
    ctx = make_context()
    ticks = gevent.spawn(lambda: [gevent.sleep(0.01) for _ in range(5)])
    assert ctx.wait_stop(0.1) is False
    assert ticks.ready()  # the hub kept running other greenlets meanwhile


def test_ready_and_request_done_reach_the_heartbeat_table_and_the_master_pipe() -> None:
    table = HeartbeatTable(capacity=2)
    record = table.allocate()
    read_fd, write_fd = os.pipe2(os.O_NONBLOCK)
    try:
        ctx = make_context(max_requests=3, table=table, record=record, notify_fd=write_fd)
        ctx.ready()
        assert table.read(record).ready and os.read(read_fd, 16) == b"w"
        for _ in range(2):
            ctx.request_done()
        assert ctx.requests_served == 2 and not table.read(record).retiring
        ctx.request_done()
        assert table.read(record).retiring and os.read(read_fd, 16) == b"w"
        ctx.request_done()  # asks only once, keeps counting
        ctx.publish_requests()  # the heartbeat writes the exact count
        assert ctx.requests_served == 4 and table.read(record).requests == 4
        with pytest.raises(BlockingIOError):
            os.read(read_fd, 16)
        assert not ctx.stopping  # recycling is the master's call: it sends TERM later
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_request_count_reaches_the_table_every_32nd_request_without_a_heartbeat() -> None:
    table = HeartbeatTable(capacity=2)
    record = table.allocate()
    ctx = make_context(table=table, record=record)
    for _ in range(31):
        ctx.request_done()
    assert table.read(record).requests == 0
    ctx.request_done()
    assert table.read(record).requests == 32
