"""`load_tests/faults.py slow-reader`, short: ten clients that stop reading cost little memory."""

from __future__ import annotations

import pytest

from load_tests import faults

pytestmark = pytest.mark.slow


def test_stalled_readers_cost_at_most_2_mib_each_are_closed_and_others_are_served() -> None:
    figure = faults.run("slow-reader", short=True)
    assert figure.held, figure.report()
