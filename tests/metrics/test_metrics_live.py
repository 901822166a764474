"""The master's metrics listener, against the real `socketify run` with two workers."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.support.ports import free_port
from tests.support.prometheus import Samples, sample, scrape
from tests.support.raw_client import get
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(120)

APP = "tests.support.apps.basic:server"


def metrics_server(
    serve: Launcher, app: str = APP, workers: int = 2
) -> tuple[ServerProcess, tuple[str, int]]:
    port = free_port()
    server = serve(app, workers=workers, args=("--metrics-bind", f"127.0.0.1:{port}"))
    return server, ("127.0.0.1", port)


def counters(samples: Samples) -> Samples:
    """The samples that may never go down: counters and histogram parts of socketify."""
    return {
        key: value
        for key, value in samples.items()
        if key[0].startswith("socketify_")
        and key[0].endswith(("_total", "_bucket", "_count", "_sum"))
    }


def test_requests_over_two_workers_are_counted_exactly(serve: Launcher) -> None:
    server, metrics = metrics_server(serve)
    pids = {get(server.tcp, "/pid").body for _ in range(20)}
    for _ in range(200):
        assert get(server.tcp, "/ping").status == 200
    for _ in range(20):
        assert get(server.tcp, "/no/such/page").status == 404
    assert len(pids) == 2  # the kernel spread the connections over both workers

    samples = scrape(metrics)
    total = "socketify_http_requests_total"
    assert sample(samples, total, method="GET", route="/ping", status="200") == 200
    assert sample(samples, total, method="GET", route="<unmatched>", status="404") == 20
    assert sample(samples, total, method="GET", route="/pid", status="200") == 20
    duration = "socketify_http_request_duration_seconds"
    assert sample(samples, f"{duration}_count", method="GET", route="/ping") == 200
    assert sample(samples, f"{duration}_count", method="GET", route="<unmatched>") == 20
    assert sample(samples, f"{duration}_bucket", method="GET", route="/ping", le="+Inf") == 200
    assert sample(samples, "socketify_http_requests_in_flight") == 0
    assert sample(samples, "socketify_workers") == 2
    worker_labels = {
        dict(labels)["worker"]
        for name, labels in samples
        if name == "process_resident_memory_bytes"
    }
    assert worker_labels == {"master", "0", "1"}


def test_a_worker_killed_with_sigkill_lowers_no_counter(serve: Launcher) -> None:
    server, metrics = metrics_server(serve)
    for _ in range(50):
        get(server.tcp, "/ping")
        get(server.tcp, "/missing")
    before = counters(scrape(metrics))
    victim = server.workers()[0]
    server_pids = set(server.workers())
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: (
            sample(scrape(metrics), "socketify_worker_restarts_total", reason="crash") == 1
            and sample(scrape(metrics), "socketify_workers") == 2
        ),
        timeout=20,
        message="the master to replace the killed worker",
    )
    assert victim not in server.workers() and server_pids != set(server.workers())
    after = counters(scrape(metrics))
    assert before.keys() <= after.keys()
    lowered = {key: (before[key], after[key]) for key in before if after[key] < before[key]}
    assert not lowered
    total = "socketify_http_requests_total"
    assert sample(after, total, method="GET", route="/ping", status="200") == 50
    assert sample(after, total, method="GET", route="<unmatched>", status="404") == 50


def test_health_and_readiness_answer_200_while_serving(serve: Launcher) -> None:
    _server, metrics = metrics_server(serve)
    assert get(metrics, "/healthz").status == 200
    ready = get(metrics, "/readyz")
    assert (ready.status, ready.body) == (200, b"ok\n")


def test_readiness_turns_503_while_a_stop_drains_and_liveness_stays_200(
    serve: Launcher,
) -> None:
    server, metrics = metrics_server(serve, "tests.support.apps.basic:relaxed", workers=1)
    slow = threading.Thread(target=get, args=(server.tcp, "/sleep?s=3"), daemon=True)
    slow.start()
    wait_for(
        lambda: sample(scrape(metrics), "socketify_http_requests_in_flight") == 1,
        timeout=10,
        message="the slow request to be in flight",
    )
    server.signal(signal.SIGTERM)
    wait_for(
        lambda: get(metrics, "/readyz").status == 503,
        timeout=10,
        message="/readyz to refuse while the worker drains",
    )
    assert get(metrics, "/readyz").body == b"draining (stopping)\n"
    assert get(metrics, "/healthz").status == 200
    slow.join(timeout=10)


def test_the_metrics_port_answers_404_elsewhere_and_never_serves_the_app(
    serve: Launcher,
) -> None:
    server, metrics = metrics_server(serve, workers=1)
    assert get(metrics, "/ping").status == 404
    assert get(server.tcp, "/metrics").status == 404
