"""examples/observability.py: its own metrics and socketify's, summed over two workers."""

from __future__ import annotations

import pytest
import requests

from tests.support.ports import free_port
from tests.support.prometheus import sample, scrape
from tests.support.raw_client import connect, get, request_bytes
from tests.support.raw_h2 import H2Client
from tests.support.raw_websocket import TEXT, RawWebSocket, client_frame
from tests.support.serve import Launcher
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(90)


def test_shop_metrics_are_summed_over_workers_and_routes_stay_patterns(serve: Launcher) -> None:
    metrics = ("127.0.0.1", free_port())
    server = serve(
        "examples.observability:server",
        workers=2,
        args=("--metrics-bind", f"{metrics[0]}:{metrics[1]}"),
    )
    for kind, times in (("gift", 30), ("book", 12)):
        for _ in range(times):
            answer = requests.post(f"{server.url}/orders/{kind}", timeout=5)
            assert answer.status_code == 201
    assert requests.post(f"{server.url}/orders/cheese", timeout=5).status_code == 404

    samples = scrape(metrics)
    assert sample(samples, "shop_orders_total", kind="gift") == 30
    assert sample(samples, "shop_orders_total", kind="book") == 12
    assert sample(samples, "shop_open_carts") == 0
    assert sample(samples, "shop_checkout_seconds_count") == 42
    total = "socketify_http_requests_total"
    assert sample(samples, total, method="POST", route="/orders/:kind", status="201") == 42
    assert sample(samples, total, method="POST", route="/orders/:kind", status="404") == 1
    buckets = {
        dict(labels)["le"]
        for name, labels in samples
        if name == "socketify_http_request_duration_seconds_bucket"
    }
    assert buckets == {"0.001", "0.005", "0.025", "0.1", "0.5", "2.5", "+Inf"}
    assert get(metrics, "/readyz").status == 200


def test_open_websocket_and_event_streams_are_counted_with_their_messages(
    serve: Launcher,
) -> None:
    metrics = ("127.0.0.1", free_port())
    server = serve(
        "examples.observability:server",
        workers=2,
        args=("--metrics-bind", f"{metrics[0]}:{metrics[1]}"),
    )

    def connections(protocol: str) -> float | None:
        return sample(scrape(metrics), "socketify_connections", protocol=protocol)

    with RawWebSocket(server.port, "/echo") as ws, connect(server.tcp) as events:
        for number in range(7):
            ws.send(client_frame(TEXT, f"hello {number}".encode()))
            assert ws.recv_message() == (TEXT, f"hello {number}".encode())
        events.sendall(request_bytes("GET", "/ticks"))
        assert events.recv(4096).startswith(b"HTTP/1.1 200 ")
        wait_for(lambda: connections("websocket") == 1, timeout=10, message="1 websocket")
        wait_for(lambda: connections("sse") == 1, timeout=10, message="1 event stream")
    wait_for(lambda: connections("websocket") == 0, timeout=10, message="the websocket gone")
    wait_for(lambda: connections("sse") == 0, timeout=10, message="the event stream gone")
    samples = scrape(metrics)
    assert sample(samples, "socketify_websocket_messages_total", direction="in") == 7
    assert sample(samples, "socketify_websocket_messages_total", direction="out") == 7


def test_http1_and_h2_connections_are_counted_apart(serve: Launcher) -> None:
    metrics = ("127.0.0.1", free_port())
    server = serve(
        "examples.observability:server",
        workers=1,
        args=("--metrics-bind", f"{metrics[0]}:{metrics[1]}"),
    )

    def connections(protocol: str) -> float | None:
        return sample(scrape(metrics), "socketify_connections", protocol=protocol)

    with H2Client.connect(server.tcp) as h2, connect(server.tcp) as http1:
        h2.handshake()
        assert h2.get("/ping").body == b"pong"
        http1.sendall(request_bytes("GET", "/ping"))
        assert http1.recv(4096).startswith(b"HTTP/1.1 200 ")
        wait_for(lambda: connections("h2") == 1, timeout=10, message="1 HTTP/2 connection")
        # The scrapes themselves go to the master's port, never to the workers.
        wait_for(lambda: connections("http1") == 1, timeout=10, message="1 HTTP/1.1 connection")
    wait_for(lambda: connections("h2") == 0, timeout=10, message="the HTTP/2 connection gone")
