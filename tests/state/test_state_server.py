"""The master's state server, driven through its rings in one process (no fork, no gevent)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from workers.shared import wire
from workers.shared.state_server import Endpoint, StateServer
from workers.shared.wire import Op, Status


@pytest.fixture
def server() -> Iterator[StateServer]:
    state = StateServer(ring_capacity=1 << 16, max_record=1 << 12)
    state.start()
    yield state
    state.stop()


def wait_records(endpoint: Endpoint, count: int, timeout: float = 5.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += endpoint.down.drain()
        time.sleep(0.0005)
    return got


def ask(endpoint: Endpoint, request_id: int, op: Op, key: bytes, args: bytes = b"") -> bytes:
    endpoint.up.try_put(wire.encode_request(request_id, op, key, args))
    (answer,) = wait_records(endpoint, 1)
    answered_id, status, body = wire.decode_answer(answer)
    assert answered_id == request_id
    assert status != Status.ERROR, body
    return body if status == Status.OK else b"<missing>"


def test_a_write_by_one_worker_is_read_by_another(server: StateServer) -> None:
    a, b = server.attach(1), server.attach(2)
    set_args = wire.F64.pack(wire.NO_TTL) + b"hello"
    assert ask(a, 1, Op.SET, b"k", set_args) == b""
    assert ask(b, 1, Op.GET, b"k") == b"hello"
    assert ask(b, 2, Op.DELETE, b"k") == b"\x01"
    assert ask(a, 2, Op.GET, b"k") == b"<missing>"


def test_a_posted_write_is_applied_before_a_later_request_from_another_worker(
    server: StateServer,
) -> None:
    for round_ in range(200):
        a, b = server.attach(1), server.attach(2)
        value = b"v%d" % round_
        a.up.try_put(wire.encode_request(0, Op.SET, b"k", wire.F64.pack(60.0) + value))
        assert ask(b, 7, Op.GET, b"k") == value
        assert a.down.empty()  # a posted write is never answered


def test_a_publish_reaches_every_other_worker_once_in_order(server: StateServer) -> None:
    peers = [server.attach(n) for n in range(4)]
    records = [wire.encode_publish(b"room", b"%d" % n) for n in range(2000)]
    pending = list(records)
    got: dict[int, list[bytes]] = {n: [] for n in range(1, 4)}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(len(v) < 2000 for v in got.values()):
        while pending:
            try:
                peers[0].up.try_put(pending[0])
            except Exception:
                break
            pending.pop(0)
        for n in range(1, 4):
            got[n] += peers[n].down.drain()
    for n in range(1, 4):
        assert got[n] == records
    time.sleep(0.05)
    assert peers[0].down.drain() == []  # the publisher delivers locally itself


def test_a_slow_reader_gets_a_backlog_not_a_loss(server: StateServer) -> None:
    fast, slow, publisher = server.attach(1), server.attach(2), server.attach(3)
    records = [wire.encode_publish(b"c", b"x" * 1000 + b"%d" % n) for n in range(300)]
    for record in records:  # 300 KB through a 64 KB ring the slow reader does not read yet
        while True:
            try:
                publisher.up.try_put(record)
                break
            except Exception:
                time.sleep(0.001)
    assert wait_records(fast, 300) == records
    assert wait_records(slow, 300) == records


def test_a_detached_worker_no_longer_receives_and_a_new_one_joins(server: StateServer) -> None:
    a = server.attach(1)
    server.attach(2)
    server.detach(2)
    c = server.attach(3)
    a.up.try_put(wire.encode_publish(b"c", b"after"))
    assert wait_records(c, 1) == [wire.encode_publish(b"c", b"after")]


def test_a_failing_operation_is_answered_with_an_error(server: StateServer) -> None:
    a = server.attach(1)
    a.up.try_put(wire.encode_request(5, Op.SET, b"s", wire.F64.pack(wire.NO_TTL) + b"text"))
    a.up.try_put(wire.encode_request(6, Op.INCR, b"s", wire.TTL_AND_AMOUNT.pack(wire.NO_TTL, 1)))
    answers = wait_records(a, 2)
    assert wire.decode_answer(answers[1])[:2] == (6, Status.ERROR)
    assert b"not an integer" in wire.decode_answer(answers[1])[2]
    assert ask(a, 7, Op.PING, b"") == b""  # and the server keeps serving


def test_compare_and_set_is_one_step_in_the_master(server: StateServer) -> None:
    a, b = server.attach(1), server.attach(2)
    cas = wire.compare_and_set_args
    assert ask(a, 1, Op.COMPARE_AND_SET, b"k", cas(60.0, None, b"first")) == b"\x01"
    assert ask(b, 1, Op.COMPARE_AND_SET, b"k", cas(60.0, None, b"again")) == b"\x00"
    assert ask(b, 2, Op.COMPARE_AND_SET, b"k", cas(wire.NO_TTL, b"first", b"")) == b"\x01"
    assert ask(a, 2, Op.GET, b"k") == b""
    assert ask(a, 3, Op.COMPARE_AND_SET, b"k", cas(60.0, b"", b"x" * 50)) == b"\x01"
    assert ask(b, 3, Op.GET, b"k") == b"x" * 50


def test_the_table_and_the_masters_store_are_sized_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from workers.shared.kvstore import DEFAULT_MAX_BYTES
    from workers.shared.table import DEFAULT_GROUPS, groups_for

    monkeypatch.setenv("SOCKETIFY_STATE_TABLE_MB", "6")
    monkeypatch.setenv("SOCKETIFY_STATE_MASTER_MB", "1.5")
    sized = StateServer()
    assert sized.table is not None and sized.table.groups == groups_for(6)
    assert sized.store.max_bytes == 3 << 19
    sized.stop()
    monkeypatch.setenv("SOCKETIFY_STATE_TABLE_MB", "lots")
    monkeypatch.setenv("SOCKETIFY_STATE_MASTER_MB", "-1")
    with caplog.at_level("ERROR", logger="socketify.state"):
        fallback = StateServer()
    assert fallback.table is not None and fallback.table.groups == DEFAULT_GROUPS
    assert fallback.store.max_bytes == DEFAULT_MAX_BYTES
    assert len([r for r in caplog.records if "not a positive number" in r.getMessage()]) == 2
    fallback.stop()


def test_the_server_thread_sweeps_expired_entries_out_of_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workers.shared import state_server
    from workers.shared.state import LocalState
    from workers.shared.table import SharedTable
    from workers.shared.table_store import TableStore
    from workers.shared.table_upkeep import select

    monkeypatch.setattr(state_server, "TABLE_SWEEP_EVERY", 0.05)
    sweeping = StateServer(table=SharedTable(groups=(4, 1, 1), stripes=1))
    sweeping.start()
    try:
        assert sweeping.table is not None
        store = TableStore(sweeping.table, LocalState())
        for n in range(40):
            store.set(f"k{n}", b"v" * (n * 20), ttl=0.05)  # in every class
        store.set("kept", b"v")
        deadline = time.monotonic() + 10
        while len(select(sweeping.table, lambda stored: True)) > 1:
            assert time.monotonic() < deadline, "the expired entries are still there"
            time.sleep(0.02)
        assert store.get("kept") == b"v"
    finally:
        sweeping.stop()
