"""The real `socketify run` talks to a fake systemd: READY, RELOADING/READY on HUP, STOPPING, the
watchdog, STATUS counters - all from the master, none from a worker."""

from __future__ import annotations

import itertools
import re
import signal
import time

import pytest

from tests.support.raw_client import get
from tests.support.sd_notify import NotifyListener
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

APP = "tests.integration.apps.systemd_app:server"


def start(serve: Launcher, notify: NotifyListener, **env: str) -> ServerProcess:
    return serve(APP, workers=2, env={"NOTIFY_SOCKET": notify.path, **env})


def served(status: str) -> int:
    match = re.fullmatch(r"2 workers serving, (\d+) requests served", status)
    return int(match.group(1)) if match else -1


def states(notify: NotifyListener) -> list[str]:
    keys = ("READY", "RELOADING", "STOPPING")
    return [key for note in notify.seen for key in keys if key in note]


def test_ready_reload_and_stop_are_announced_in_order(
    serve: Launcher, notify: NotifyListener
) -> None:
    server = start(serve, notify)
    ready = notify.wait_for("READY")
    assert ready["MAINPID"] == str(server.pid)
    # READY waits for every worker: both have booted by then.
    assert ready["STATUS"] == "2 workers serving, 0 requests served"
    assert len(server.workers()) == 2

    for _ in range(3):
        assert get(server.address, "/ping").body == b"pong"
    # Counted from the heartbeat table (the launcher's own probe requests count too).
    notify.wait_for("STATUS", lambda status: served(status) >= 3, timeout=5)

    old = set(server.workers())
    server.signal(signal.SIGHUP)
    reloading = notify.wait_for("RELOADING")
    now_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert 0 <= now_usec - int(reloading["MONOTONIC_USEC"]) < 5_000_000
    assert reloading["STATUS"].startswith("Reloading (generation 2): ")
    notify.wait_for("READY")
    # READY again once every new worker serves, as the master logged just before sending it.
    assert "reload complete: generation 2 serving" in server.output()
    wait_for(lambda: old.isdisjoint(server.workers()), 10, message="the old workers to drain")
    worker_pid, master_pid = get(server.address, "/pid").body.decode().split()
    assert int(master_pid) == server.pid and int(worker_pid) not in old

    server.signal(signal.SIGTERM)
    stopping = notify.wait_for("STOPPING")
    assert stopping["STATUS"].startswith("Stopping: ")
    assert server.wait_exit(10) == 0

    assert states(notify) == ["READY", "RELOADING", "READY", "STOPPING"]
    assert {note.pid for note in notify.seen} == {server.pid}  # never a worker (NotifyAccess=main)
    assert not any("WATCHDOG" in note for note in notify.seen)  # no $WATCHDOG_USEC, no pings


def test_watchdog_is_fed_at_half_its_interval_and_workers_see_no_systemd_variables(
    serve: Launcher, notify: NotifyListener
) -> None:
    server = start(serve, notify, WATCHDOG_USEC="1000000")
    notify.wait_for("READY")
    pings = [note for note in notify.collect(2.3) if "WATCHDOG" in note]
    assert all(note["WATCHDOG"] == "1" and note.pid == server.pid for note in pings)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(pings)]
    # Every 0.5 s; systemd would kill the service only after a full second without one.
    assert 3 <= len(pings) <= 6, gaps
    assert all(0.3 < gap < 0.9 for gap in gaps), gaps

    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC"):
        assert get(server.address, f"/env/{name}").body == b"-"


def test_master_stopped_in_its_loop_stops_feeding_the_watchdog(
    serve: Launcher, notify: NotifyListener
) -> None:
    server = start(serve, notify, WATCHDOG_USEC="400000")
    notify.wait_for("READY")
    notify.wait_for("WATCHDOG")
    server.signal(signal.SIGSTOP)  # a hung master: its loop no longer turns
    try:
        silent = [note for note in notify.collect(1.0) if "WATCHDOG" in note]
    finally:
        server.signal(signal.SIGCONT)
    assert len(silent) <= 1  # at most one ping already in flight when it stopped
    notify.wait_for("WATCHDOG", timeout=3)  # the loop turns again: pings resume
