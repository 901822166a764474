"""`load_tests/faults.py redis-outage --short`: under steady session load, a Redis that is
stopped, continued, killed and restarted leaves no request unanswered past 2 s and logs at
most two lines (one per worker) per outage."""

from __future__ import annotations

import pytest

from load_tests import faults
from tests.support.services import require_module, unavailable

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_redis_outage_answers_every_request_within_2_s_and_logs_each_outage_once() -> None:
    require_module("redis", "pip install 'socketify-gevent[redis]'")
    try:
        figure = faults.run("redis-outage", short=True)
    except faults.CouldNotRun as exc:  # no redis-server on this machine
        unavailable(str(exc))
    assert figure.held, figure.report()
