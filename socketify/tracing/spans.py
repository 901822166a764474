"""One server span per request: `app.instrument(RequestSpans(tracer))`.

The span continues the trace of an incoming W3C `traceparent` (through the configured
propagators, `OTEL_PROPAGATORS`), is current while middleware and the handler run (so their
own spans and `socketify.http_client` calls join it), and ends when the answer is final. It
is named `METHOD /route/pattern` once routing has matched (plain `METHOD` otherwise, so names
stay bounded). A WebSocket or SSE upgrade's span covers the handshake; the session after it
is not part of the request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry import propagate
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, StatusCode, Tracer

if TYPE_CHECKING:
    from socketify.core.application import Answer
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["RequestSpans"]


class _HeaderGetter(Getter["Request"]):
    """How the propagators read a request's headers."""

    def get(self, carrier: Request, key: str) -> list[str] | None:
        value = carrier.header(key)
        return [value] if value else None

    def keys(self, carrier: Request) -> list[str]:
        return list(carrier.headers.keys())


_GETTER = _HeaderGetter()


class RequestSpans:
    """Records each request as a SERVER span of `tracer`."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def __call__(self, req: Request, res: Response, answer: Answer) -> None:
        parent = propagate.extract(req, getter=_GETTER)
        method = req.method
        attributes = {
            "http.request.method": method,
            "url.path": req.path,
            "url.scheme": req.scheme,
            "client.address": req.remote_addr,
            "network.protocol.name": "http",
            "network.protocol.version": req.http_version.partition("/")[2],
        }
        with self._tracer.start_as_current_span(
            method, context=parent, kind=SpanKind.SERVER, attributes=attributes
        ) as span:
            answer(req, res)
            status = res.status_code
            route = req.route
            if route is not None:
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", status)
            if res.upgrade is not None:
                span.set_attribute("socketify.upgrade", "websocket" if status == 101 else "sse")
            if status >= 500:
                span.set_status(StatusCode.ERROR)
