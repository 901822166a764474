"""`--metrics-bind` and `Server(metrics_bind=...)` as the command line takes them."""

from __future__ import annotations

import socket

import pytest

from tests.support.ports import free_port
from tests.support.prometheus import sample, scrape
from tests.support.raw_client import get
from tests.support.serve import Launcher, run_cli

pytestmark = pytest.mark.timeout(60)


def test_the_servers_own_metrics_bind_and_buckets_are_used(serve: Launcher) -> None:
    port = free_port()
    server = serve("tests.metrics.options_app:server", env={"METRICS_BIND": f"127.0.0.1:{port}"})
    assert get(server.tcp, "/ping").status == 200
    samples = scrape(("127.0.0.1", port))
    duration = "socketify_http_request_duration_seconds_bucket"
    assert sample(samples, duration, method="GET", route="/ping", le="0.5") == 1
    assert sample(samples, duration, method="GET", route="/ping", le="0.1") is None


def test_metrics_need_the_pre_fork_master() -> None:
    result = run_cli(
        "run", "tests.support.apps.basic:server", "--workers", "0", "--metrics-bind", ":0"
    )
    assert result.returncode == 2
    assert "--metrics-bind needs the pre-fork master" in result.stderr


def test_a_taken_metrics_port_fails_at_start_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "run",
            "tests.support.apps.basic:server",
            "--bind",
            f"127.0.0.1:{free_port()}",
            "--metrics-bind",
            f"127.0.0.1:{port}",
        )
    assert result.returncode == 1
    assert f"error: failed to bind 127.0.0.1:{port}" in result.stderr


def test_bad_buckets_are_a_usage_error() -> None:
    result = run_cli(
        "run",
        "tests.support.apps.basic:server",
        "--metrics-bind",
        ":0",
        "--metrics-buckets",
        "1,0.5",
    )
    assert result.returncode == 2
    assert "--metrics-buckets" in result.stderr
