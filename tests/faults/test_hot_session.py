"""The hot-session experiment, short: one shared ~300-byte session under 32 clients keeps
every client's own writes, and memory stays bounded under an anonymous flood (in the table
and the master's store behind it, or the master's store alone)."""

from __future__ import annotations

import re
import shutil

import pytest

from load_tests.faults import HOT_MASTER_MB, HOT_SHORT_TABLE_MB, run
from workers.shared.table import GROUP_SLOTS, groups_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed"),
]


def test_a_hot_session_keeps_every_clients_own_writes_and_memory_stays_bounded() -> None:
    figure = run("hot-session", short=True)
    print(figure.report())
    # The rate ratio is the experiment's figure (`load_tests/faults.py hot-session`): speed
    # lives in the benchmark, not in a test. What must always hold: no write lost, memory
    # bounded.
    own_writes = next(line for line in figure.details if line.startswith("own keys written"))
    assert re.search(r"[1-9][\d,]* writes by \d+ clients, 0 lost", own_writes), own_writes
    assert not any(line.startswith("RSS past its bound") for line in figure.details), (
        figure.report()
    )
    stored = next(line for line in figure.details if line.startswith("sessions stored"))
    found = re.search(r"flood: ([\d,]+) \(([\d,]+) with no table", stored)
    assert found, stored
    with_table, in_master = (int(count.replace(",", "")) for count in found.groups())
    # No live session is evicted while there is room: past the small table's 1 KiB class
    # they go to its larger classes and then to the master's store, so more are kept than
    # the class holds, and more than the master's store alone keeps...
    assert with_table > groups_for(HOT_SHORT_TABLE_MB)[1] * GROUP_SLOTS
    assert with_table > in_master
    # ...which evicts once full: each session counted as its ~640 bytes.
    assert 0 < in_master <= (HOT_MASTER_MB[0] << 20) // 600
