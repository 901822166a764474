"""`python load_tests/faults.py hup-reload --short`: two SIGHUPs to the master under wrk fail
no request, and every worker is replaced."""

from __future__ import annotations

import shutil

import pytest

from load_tests import faults

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("wrk") is None, reason="the experiment drives wrk"),
]


def test_two_reloads_under_load_fail_no_request_and_replace_every_worker() -> None:
    figure = faults.run("hup-reload", short=True)
    assert figure.held, figure.report()
