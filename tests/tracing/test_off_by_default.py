"""Without OTEL_* configuration (or the extra), tracing and metrics load nothing."""

from __future__ import annotations

import subprocess
import sys

from socketify.tracing import configured

CODE = """
import sys
from socketify import Server, http_client, metrics
from socketify.middleware import access_log
from socketify.testing import TestClient

app = Server()
app.use(access_log.middleware(format="json"))
app.get("/", lambda req, res: res.send("ok"))
assert TestClient(app).get("/").status == 200
metrics.Counter("app_things_total", "Things").inc()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("opentelemetry", "prometheus_client"))
assert not loaded, loaded
"""


def test_an_app_without_configuration_never_imports_opentelemetry_or_prometheus() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert result.returncode == 0, result.stderr


def test_only_an_exporter_name_turns_tracing_on() -> None:
    assert not configured({})
    assert not configured({"OTEL_TRACES_EXPORTER": "none"})
    assert not configured({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"})
    assert configured({"OTEL_TRACES_EXPORTER": "otlp"})
    assert configured({"OTEL_TRACES_EXPORTER": "console,otlp"})
