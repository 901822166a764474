"""OpenTelemetry traces of requests (the `otel` extra), configured by `OTEL_*` variables.

    OTEL_TRACES_EXPORTER=otlp OTEL_SERVICE_NAME=shop socketify run app:server

`instrument(app, provider)` traces a Server with a provider of your own (tests use the SDK's
in-memory exporter this way). Importing this package does not import OpenTelemetry.
"""

from __future__ import annotations

from socketify.tracing.context import current_ids, enabled
from socketify.tracing.setup import configured, instrument

__all__ = ["configured", "current_ids", "enabled", "instrument"]
