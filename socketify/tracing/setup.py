"""Turning tracing on in a worker, from the standard `OTEL_*` environment variables.

Tracing is on when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`, or any
installed `opentelemetry_traces_exporter` entry point) and `OTEL_SDK_DISABLED` is not `true`;
unset, it is off (no surprise network traffic). The SDK reads the rest itself:
`OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (the resource), `OTEL_TRACES_SAMPLER`,
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_BSP_*`. A process that already set a tracer provider
(`opentelemetry-instrument`, the application itself) keeps it.

Each worker makes its own provider after the fork: the batch exporter runs a thread, which
must not be inherited from the master.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points
from typing import Any

from socketify.tracing.context import enable

__all__ = ["configured", "instrument", "start"]

log = logging.getLogger("socketify.error")

# `otlp` is the SDK's name for "the OTLP exporter that is installed".
_ALIASES = {"otlp": ("otlp_proto_http", "otlp_proto_grpc")}


def configured(environ: Any = os.environ) -> bool:
    """Whether the environment asks for traces."""
    names = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return bool(names) and names != "none" and not disabled


def instrument(app: Any, provider: Any = None) -> None:
    """Trace every request of `app` (a Server) with `provider` (default: the global one)."""
    from opentelemetry import trace

    from socketify.tracing.spans import RequestSpans

    tracer = trace.get_tracer("socketify", tracer_provider=provider)
    app.instrument(RequestSpans(tracer))
    enable()


def start(app: Any) -> Any:
    """In a worker: trace `app` as the environment says; returns the provider to shut down
    at exit, or None (off, or the `otel` extra is missing)."""
    if not configured():
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("OTEL_TRACES_EXPORTER is set but tracing is off: %s (the otel extra)", exc)
        return None
    provider: Any = None
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        provider = TracerProvider(resource=Resource.create())
        for name in os.environ["OTEL_TRACES_EXPORTER"].split(","):
            exporter = _exporter(name.strip().lower())
            if exporter is not None:
                provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    instrument(getattr(app, "http", app), provider)
    return provider


def _exporter(name: str) -> Any:
    if name in ("", "none"):
        return None
    for candidate in _ALIASES.get(name, (name,)):
        found = entry_points(group="opentelemetry_traces_exporter", name=candidate)
        for entry in found:
            return entry.load()()
    log.warning("OTEL_TRACES_EXPORTER: no exporter named %r is installed", name)
    return None
