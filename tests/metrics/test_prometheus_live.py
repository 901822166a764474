"""A real Prometheus scrapes the metrics listener of a two-worker server and agrees with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.prometheus import PrometheusServer, sample, scrape
from tests.support.raw_client import get
from tests.support.serve import Launcher
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(180)


def test_prometheus_query_api_returns_the_exact_request_totals(
    serve: Launcher, tmp_path: Path
) -> None:
    port = free_port()
    server = serve(
        "tests.support.apps.basic:server",
        workers=2,
        args=("--metrics-bind", f"127.0.0.1:{port}"),
    )
    with PrometheusServer(tmp_path, target=("127.0.0.1", port)) as prometheus:
        for _ in range(200):
            assert get(server.tcp, "/ping").status == 200
        for _ in range(20):
            assert get(server.tcp, "/missing").status == 404
        ours = scrape(("127.0.0.1", port))
        total = "socketify_http_requests_total"
        assert sample(ours, total, method="GET", route="/ping", status="200") == 200
        query = prometheus.query
        wait_for(
            lambda: query('sum(socketify_http_requests_total{route="/ping",status="200"})') == 200,
            timeout=30,
            interval=0.2,
            message="Prometheus to scrape the 200 pings",
        )
        assert query('sum(socketify_http_requests_total{route="<unmatched>",status="404"})') == 20
        assert query("sum(socketify_http_request_duration_seconds_count)") == 220
        assert query("socketify_workers") == 2
        assert query('up{job="socketify"}') == 1
