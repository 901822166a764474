"""Server spans recorded with the SDK's in-memory exporter, through the in-process client."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from socketify import Request, Response, Server, http_client
from socketify.middleware import access_log
from socketify.testing import TestClient
from socketify.tracing import instrument
from tests.support.services import require_module

sdk_trace = require_module("opentelemetry.sdk.trace", "pip install 'socketify-gevent[otel]'")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


class Callee:
    """A plain HTTP server on a thread that remembers the `traceparent` it was sent."""

    def __init__(self) -> None:
        seen: list[str | None] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("traceparent"))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.seen = seen
        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def callee() -> Iterator[Callee]:
    server = Callee()
    yield server
    server.close()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def traced_app(exporter: InMemorySpanExporter, callee_url: str = "") -> Server:
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Server()

    @app.get("/users/:id")
    def user(req: Request, res: Response) -> None:
        res.send(req.params["id"])

    @app.get("/boom")
    def boom(req: Request, res: Response) -> None:
        raise RuntimeError("boom")

    @app.get("/call")
    def call(req: Request, res: Response) -> None:
        res.send(str(http_client.get(callee_url).status))

    app.use(access_log.middleware(format="json"), first=True)
    instrument(app, provider)
    return app


def test_each_request_is_one_server_span_named_by_its_route(
    exporter: InMemorySpanExporter,
) -> None:
    client = TestClient(traced_app(exporter))
    assert client.get("/users/42").status == 200
    (span,) = exporter.get_finished_spans()
    assert span.name == "GET /users/:id"
    assert span.kind is SpanKind.SERVER
    attributes = dict(span.attributes or {})
    assert attributes["http.request.method"] == "GET"
    assert attributes["http.route"] == "/users/:id"
    assert attributes["url.path"] == "/users/42"
    assert attributes["http.response.status_code"] == 200
    assert attributes["client.address"] == "127.0.0.1"
    assert attributes["network.protocol.version"] == "1.1"


def test_an_unmatched_path_keeps_a_bounded_name_and_a_500_is_an_error(
    exporter: InMemorySpanExporter,
) -> None:
    client = TestClient(traced_app(exporter))
    client.get("/no/such/page/123")
    client.get("/boom")
    missing, failed = exporter.get_finished_spans()
    assert missing.name == "GET"
    assert dict(missing.attributes or {})["http.response.status_code"] == 404
    assert failed.status.status_code is StatusCode.ERROR


def test_an_incoming_traceparent_is_continued(exporter: InMemorySpanExporter) -> None:
    client = TestClient(traced_app(exporter))
    client.get("/users/1", headers={"traceparent": TRACEPARENT})
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID


def test_a_malformed_traceparent_starts_a_new_trace(exporter: InMemorySpanExporter) -> None:
    client = TestClient(traced_app(exporter))
    client.get("/users/1", headers={"traceparent": "00-zz-not-a-trace"})
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    assert span.context.is_valid


def test_the_http_client_carries_the_trace_to_the_callee(
    exporter: InMemorySpanExporter, callee: Callee
) -> None:
    client = TestClient(traced_app(exporter, callee.url))
    assert client.get("/call", headers={"traceparent": TRACEPARENT}).text == "204"
    (span,) = exporter.get_finished_spans()
    (sent,) = callee.seen
    assert sent == f"00-{TRACE_ID}-{format(span.context.span_id, '016x')}-01"


def test_the_json_access_log_names_the_trace_and_the_span(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    client = TestClient(traced_app(exporter))
    with caplog.at_level(logging.INFO, logger="socketify.access"):
        client.get("/users/7", headers={"traceparent": TRACEPARENT})
    (span,) = exporter.get_finished_spans()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "socketify.access"]
    assert f'"trace_id":"{TRACE_ID}"' in line
    assert f'"span_id":"{format(span.context.span_id, "016x")}"' in line
