"""The hot-session experiment, short: one shared ~300-byte session under 32 clients keeps
every client's own writes, memory settles under an anonymous flood, and the rate holds up."""

from __future__ import annotations

import shutil

import pytest

from load_tests.faults import HOT_SHORT_TABLE_MB, run

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed"),
]


def test_a_hot_session_keeps_every_clients_own_writes_and_memory_stays_bounded() -> None:
    figure = run("hot-session", short=True)
    print(figure.report())
    assert figure.held, figure.report()
    # The flood filled the small table's 1 KiB class and evicted past it.
    stored = next(line for line in figure.details if line.startswith("sessions stored"))
    assert 0 < int(stored.rpartition(" ")[2].replace(",", "")) <= HOT_SHORT_TABLE_MB * 1024
