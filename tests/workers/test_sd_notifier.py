"""`workers.supervise.systemd.Notifier` on its own: what it sends for each state of the
master, when it retries, how it counts requests, and how it reads (and consumes) its environment."""

from __future__ import annotations

import logging
import os
import socket
import time

import pytest

from tests.support.sd_notify import NotifyListener
from workers.supervise.heartbeat import HeartbeatTable
from workers.supervise.roster import Roster, WorkerProc
from workers.supervise.systemd import Notifier


@pytest.fixture
def table() -> HeartbeatTable:
    return HeartbeatTable(capacity=8)


def worker(table: HeartbeatTable, pid: int, *, ready: bool = True, served: int = 0) -> WorkerProc:
    record = table.allocate()
    table.set_requests(record, served)
    return WorkerProc(pid, slot=0, generation=1, record=record, spawned_at=0.0, ready=ready)


def test_each_state_change_is_sent_once(notify: NotifyListener, table: HeartbeatTable) -> None:
    notifier = Notifier(notify.path)
    roster = Roster()
    roster.add(worker(table, 101))
    for _ in range(3):
        notifier.observe("running", None, 1, roster, table)
    notifier.observe("running", 2, 1, roster, table)
    notifier.observe("running", None, 1, roster, table)
    notifier.observe("stopping", None, 1, roster, table)
    notifier.observe("stopped", None, 1, roster, table)
    sent = notify.collect(0.2)
    assert [sorted(note.fields) for note in sent] == [
        ["MAINPID", "READY", "STATUS"],
        ["MONOTONIC_USEC", "RELOADING", "STATUS"],
        ["MAINPID", "READY", "STATUS"],
        ["STATUS", "STOPPING"],
    ]
    assert sent[0]["MAINPID"] == str(os.getpid())
    assert {note.pid for note in sent} == {os.getpid()}


def test_status_counts_requests_of_live_and_exited_workers(
    notify: NotifyListener, table: HeartbeatTable
) -> None:
    notifier = Notifier(notify.path)
    roster = Roster()
    first, second = worker(table, 101, served=5), worker(table, 102, served=7)
    roster.add(first)
    roster.add(second)
    notifier.observe("running", None, 2, roster, table)
    assert notify.wait_for("READY")["STATUS"] == "2 workers serving, 12 requests served"
    roster.pop(first.pid)  # it exited: what it served still counts
    table.set_requests(second.record, 8)
    notifier.observe("running", None, 2, roster, table)
    assert notify.collect(0.1) == []  # counters alone are reported at most once a second
    time.sleep(1.0)
    notifier.observe("running", None, 2, roster, table)
    status = notify.wait_for("STATUS", lambda _: True, timeout=1)["STATUS"]
    assert status == "1 workers serving, 13 requests served"


def test_send_that_failed_is_retried_on_the_next_turn(
    tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    listener = NotifyListener()
    path = listener.path
    listener.sock.close()
    os.unlink(path)  # systemd is not listening (yet)
    notifier = Notifier(path)
    with caplog.at_level(logging.WARNING, "socketify.master"):
        notifier.observe("running", None, 1, Roster(), None)
        notifier.observe("running", None, 1, Roster(), None)
    assert len([r for r in caplog.records if "cannot notify systemd" in r.message]) == 1
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    receiver.settimeout(1)
    try:
        notifier.observe("running", None, 1, Roster(), None)
        assert b"READY=1" in receiver.recv(4096)
    finally:
        receiver.close()
        listener.close()


def test_watchdog_pings_at_half_the_interval_and_bounds_the_loop_sleep(
    notify: NotifyListener,
) -> None:
    notifier = Notifier(notify.path, watchdog_usec=200_000)
    assert notifier.watchdog_interval == pytest.approx(0.1)
    deadline = time.monotonic() + 0.55
    while time.monotonic() < deadline:
        time.sleep(notifier.sleep_bound(0.5))  # the master's loop, with its idle tick
        notifier.observe("running", None, 1, Roster(), None)
    pings = sum(1 for note in notify.collect(0.1) if "WATCHDOG" in note)
    assert 3 <= pings <= 7  # six on time; fewer only if this process was starved
    assert Notifier(notify.path).sleep_bound(0.5) == 0.5  # no watchdog: the tick as is


def test_abstract_notify_socket_is_supported() -> None:
    name = f"socketify-test-{os.getpid()}"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind("\0" + name)
    receiver.settimeout(1)
    try:
        assert Notifier("@" + name).send("STATUS=hello")
        assert receiver.recv(100) == b"STATUS=hello"
    finally:
        receiver.close()


def test_environment_is_read_once_and_removed(notify: NotifyListener) -> None:
    env = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}
    notifier = Notifier.from_env(env)
    assert notifier.enabled and env == {}
    assert notifier.watchdog_interval == 0.0  # WATCHDOG_PID names another process
    env = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "3000000"}
    assert Notifier.from_env(env).watchdog_interval == pytest.approx(1.5)
    assert not Notifier.from_env({}).enabled
    assert not Notifier.from_env({"NOTIFY_SOCKET": "vsock:2:1234"}).enabled
    Notifier(None).observe("running", None, 1, Roster(), None)  # inert: no error, nothing sent
