"""The master's metrics listener, against the real `socketify run` with two workers."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.support.ports import free_port
from tests.support.prometheus import Samples, sample, scrape
from tests.support.raw_client import connect, get, request_bytes
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


def test_a_reload_keeps_every_count_and_readiness_refuses_until_it_completes(
    serve: Launcher,
) -> None:
    port = free_port()
    metrics = ("127.0.0.1", port)
    server = serve(
        "tests.support.apps.slow_boot:server",
        workers=2,
        env={"SLOW_BOOT_SECONDS": "1.5"},
        args=("--metrics-bind", f"127.0.0.1:{port}"),
    )
    for _ in range(30):
        assert get(server.tcp, "/ping").status == 200
    old = set(server.workers())
    server.signal(signal.SIGHUP)
    wait_for(
        lambda: get(metrics, "/readyz").body == b"draining (reloading)\n",
        timeout=10,
        message="/readyz to refuse while the new generation boots",
    )
    wait_for(
        lambda: get(metrics, "/readyz").status == 200 and not old & set(server.workers()),
        timeout=30,
        message="the reload to complete",
    )
    for _ in range(10):
        assert get(server.tcp, "/ping").status == 200
    samples = scrape(metrics)
    total = "socketify_http_requests_total"
    assert sample(samples, total, method="GET", route="/ping", status="200") == 40
    assert sample(samples, "socketify_worker_restarts_total", reason="reload") == 2
    assert sample(samples, "socketify_worker_restarts_total", reason="crash") == 0


def test_a_recycled_worker_is_a_restart_for_max_requests(serve: Launcher) -> None:
    port = free_port()
    server = serve(
        APP, workers=1, args=("--metrics-bind", f"127.0.0.1:{port}", "--max-requests", "20")
    )
    for _ in range(25):
        assert get(server.tcp, "/ping").status == 200
    wait_for(
        lambda: (
            sample(
                scrape(("127.0.0.1", port)),
                "socketify_worker_restarts_total",
                reason="max_requests",
            )
            == 1
        ),
        timeout=20,
        message="the recycled worker to be counted",
    )
    total = sample(
        scrape(("127.0.0.1", port)),
        "socketify_http_requests_total",
        method="GET",
        route="/ping",
        status="200",
    )
    assert total == 25


def test_an_idle_or_malformed_client_of_the_metrics_port_blocks_no_probe(
    serve: Launcher,
) -> None:
    _server, metrics = metrics_server(serve, workers=1)
    with connect(metrics) as idle, connect(metrics) as garbage:
        idle.sendall(b"GET /metr")  # and never more
        garbage.sendall(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
        assert b"400" in garbage.recv(4096)  # refused, and the port still answers
        assert get(metrics, "/healthz").status == 200
    with connect(metrics) as writer:
        writer.sendall(request_bytes("POST", "/metrics", body=b"x"))
        assert b" 501 " in writer.recv(1024).split(b"\r\n", 1)[0]


def test_a_raw_tcp_service_counts_its_connections(serve: Launcher) -> None:
    server, metrics = metrics_server(serve, "examples.tcp_echo:service", workers=1)

    def open_tcp() -> float | None:
        return sample(scrape(metrics), "socketify_connections", protocol="tcp")

    with connect(server.tcp) as client:
        client.sendall(b"hello\n")
        assert client.recv(64) == b"hello\n"
        wait_for(lambda: open_tcp() == 1, timeout=10, message="1 TCP connection")
    wait_for(lambda: open_tcp() == 0, timeout=10, message="the TCP connection gone")
    assert get(metrics, "/readyz").status == 200
