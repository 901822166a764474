"""The master's bookkeeping: which workers cover a slot, and the respawn backoff."""

from __future__ import annotations

import pytest

from workers.supervise.roster import Backoff, Roster, WorkerProc

pytestmark = pytest.mark.timeout(5)


def test_first_crash_respawns_at_once_then_delays_double_up_to_the_cap() -> None:
    backoff = Backoff(first=0.1, cap=0.5, reset_after=10)
    delays = [backoff.failed(0, uptime=1.0, now=100.0) for _ in range(6)]
    assert delays == [0.0, 0.1, 0.2, 0.4, 0.5, 0.5]
    assert not backoff.ready(0, now=100.4)
    assert backoff.ready(0, now=100.5)
    assert backoff.waiting(now=100.4)
    assert backoff.ready(1, now=0.0)  # other slots are unaffected


def test_a_worker_that_stayed_up_long_enough_resets_the_backoff() -> None:
    backoff = Backoff(first=0.1, cap=10, reset_after=10)
    for _ in range(4):
        backoff.failed(0, uptime=0.5, now=0.0)
    assert backoff.failed(0, uptime=30.0, now=0.0) == 0.0


def test_serving_excludes_leaving_workers_and_other_generations() -> None:
    roster = Roster()
    current = WorkerProc(pid=10, slot=0, generation=1, record=0, spawned_at=0.0)
    retiring = WorkerProc(pid=11, slot=0, generation=1, record=1, spawned_at=0.0, retiring=True)
    stopping = WorkerProc(pid=12, slot=0, generation=1, record=2, spawned_at=0.0, stop_sent=True)
    newer = WorkerProc(pid=13, slot=0, generation=2, record=3, spawned_at=0.0)
    other_slot = WorkerProc(pid=14, slot=1, generation=1, record=4, spawned_at=0.0)
    for proc in (current, retiring, stopping, newer, other_slot):
        roster.add(proc)
    assert roster.serving(0, 1) == [current]
    assert roster.serving(0, 2) == [newer]
    assert len(roster.in_slot(0)) == 4
    assert roster.pop(10) is current and roster.pop(10) is None
    assert len(roster) == 4
