"""`python load_tests/faults.py slowloris --short`: 500 connections trickling a head are cut
with 408 at the header deadline, while /ping on the same worker stays fast."""

from __future__ import annotations

import pytest

from load_tests import faults

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]


def test_slowloris_connections_get_408_at_the_deadline_while_ping_stays_fast() -> None:
    figure = faults.run("slowloris", short=True)
    assert figure.held, figure.report()
