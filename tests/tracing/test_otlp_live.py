"""Traces of the real `socketify run`, exported over OTLP/HTTP to a receiver the test runs."""

from __future__ import annotations

import pytest

from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.raw_client import connect, get, request_bytes
from tests.support.raw_websocket import RawWebSocket
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(120)

APP = "examples.observability:server"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"
SERVER_KIND = 2  # OTLP's SPAN_KIND_SERVER


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == name]


def test_requests_and_upgrades_are_exported_as_server_spans(serve: Launcher) -> None:
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_SERVICE_NAME": "shop",
            **receiver.environment,
        }
        server = serve(APP, workers=2, env=env)
        assert get(server.tcp, "/ping", headers=[("traceparent", TRACEPARENT)]).status == 200
        with RawWebSocket(server.port, "/echo"):
            pass
        with connect(server.tcp) as events:
            events.sendall(request_bytes("GET", "/ticks"))
            assert events.recv(4096).startswith(b"HTTP/1.1 200 ")

        spans = receiver.wait_spans(
            lambda spans: bool(
                named(spans, "GET /ping")
                and named(spans, "GET /echo")
                and named(spans, "GET /ticks")
            )
        )
        (ping,) = named(spans, "GET /ping")
        assert (ping.trace_id, ping.parent_span_id) == (TRACE_ID, "b7ad6b7169203331")
        assert ping.kind == SERVER_KIND
        assert ping.service_name == "shop"
        assert ping.attributes["http.route"] == "/ping"
        assert ping.attributes["http.response.status_code"] == 200
        assert ping.attributes["client.address"] == "127.0.0.1"
        (echo,) = named(spans, "GET /echo")
        assert echo.attributes["socketify.upgrade"] == "websocket"
        assert echo.attributes["http.response.status_code"] == 101
        (stream,) = named(spans, "GET /ticks")
        assert stream.attributes["socketify.upgrade"] == "sse"


def test_without_an_exporter_configured_nothing_is_sent(serve: Launcher) -> None:
    with OtlpReceiver() as receiver:
        server = serve(APP, workers=1, env=receiver.environment)
        for _ in range(5):
            assert get(server.tcp, "/ping").status == 200
        server.stop()
        assert receiver.spans() == []


def test_a_server_in_one_process_traces_too(serve: Launcher) -> None:
    with OtlpReceiver() as receiver:
        env = {"OTEL_TRACES_EXPORTER": "otlp", **receiver.environment}
        server = serve(APP, workers=0, env=env)
        assert get(server.tcp, "/ping", headers=[("traceparent", TRACEPARENT)]).status == 200
        spans = receiver.wait_spans(lambda spans: bool(named(spans, "GET /ping")))
        (ping,) = named(spans, "GET /ping")
        assert ping.trace_id == TRACE_ID
