"""`python load_tests/faults.py kill-worker --short`: kill -9 of one of two workers under wrk
loses only the connections that worker held, and a replacement answers within the bar."""

from __future__ import annotations

import shutil

import pytest

from load_tests import faults

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("wrk") is None, reason="the experiment drives wrk"),
]


def test_killed_worker_loses_only_its_own_connections_and_is_replaced() -> None:
    figure = faults.run("kill-worker", short=True)
    assert figure.held, figure.report()
