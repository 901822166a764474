"""An OTLP/HTTP trace receiver for tests: what a collector would be sent, decoded.

    with OtlpReceiver() as receiver:
        env = {"OTEL_TRACES_EXPORTER": "otlp", **receiver.environment}
        ...
        spans = receiver.wait_spans(lambda spans: len(spans) >= 3)

It accepts `POST /v1/traces` bodies (protobuf `ExportTraceServiceRequest`, the OTLP/HTTP
exporter's default) on a free loopback port and keeps every span with its resource.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tests.support.services import require_module
from tests.support.wait import wait_for

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, flattened."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service_name: str


class OtlpReceiver:
    """A collector's OTLP/HTTP traces endpoint, in a thread of the test process."""

    def __init__(self) -> None:
        service = require_module(
            "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            "pip install opentelemetry-exporter-otlp-proto-http",
        )
        spans: list[ReceivedSpan] = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                export = service.ExportTraceServiceRequest.FromString(body)
                with lock:
                    spans.extend(_flatten(export))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._spans = spans
        self._lock = lock
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self._server.server_address[1]
        self.environment = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}/v1/traces",
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds: export soon after each span
        }

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far."""
        with self._lock:
            return list(self._spans)

    def wait_spans(
        self, enough: Callable[[list[ReceivedSpan]], bool], timeout: float = 20.0
    ) -> list[ReceivedSpan]:
        """The spans once `enough(spans)` holds (fails the test after `timeout`)."""
        wait_for(lambda: enough(self.spans()), timeout=timeout, message="the exported spans")
        return self.spans()


def _flatten(export: Any) -> list[ReceivedSpan]:
    found = []
    for resource_spans in export.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        kind=span.kind,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        service_name=str(resource.get("service.name", "")),
                    )
                )
    return found


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None
