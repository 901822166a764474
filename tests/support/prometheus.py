"""Reading a `/metrics` page, and a real Prometheus server for a test.

    samples = scrape(("127.0.0.1", port))
    samples[("socketify_http_requests_total", (("method", "GET"), ("route", "/ping"), ...))]

    with PrometheusServer(tmp_path, target=("127.0.0.1", port)) as prom:
        prom.query('sum(socketify_http_requests_total{route="/ping"})')   # -> 200.0 or None

The page is parsed by `prometheus_client`'s own parser; Prometheus is Debian's `prometheus`,
started with its own config, a free port and storage in the test's temporary directory.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType

from tests.support.ports import free_port
from tests.support.raw_client import Address, get
from tests.support.services import require_module, require_program
from tests.support.wait import wait_for

__all__ = ["PrometheusServer", "Samples", "sample", "scrape"]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(address: Address, path: str = "/metrics") -> Samples:
    """Every sample of the page at `path`: (name, sorted labels) -> value."""
    parser = require_module("prometheus_client.parser", "pip install prometheus_client")
    response = get(address, path)
    assert response.status == 200, response
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in parser.text_string_to_metric_families(response.body.decode()):
        for found in family.samples:
            samples[(found.name, tuple(sorted(found.labels.items())))] = found.value
    return samples


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    """The value of the sample `name` with exactly `labels`, or None when there is none."""
    return samples.get((name, tuple(sorted(labels.items()))))


class PrometheusServer:
    """A private Prometheus scraping `target` every 200 ms; `query()` asks its HTTP API."""

    def __init__(self, directory: Path, target: tuple[str, int]) -> None:
        program = require_program("prometheus", "prometheus")
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            "  scrape_interval: 200ms\n"
            "  scrape_timeout: 200ms\n"
            "scrape_configs:\n"
            "  - job_name: socketify\n"
            f"    static_configs: [{{targets: ['{target[0]}:{target[1]}']}}]\n"
        )
        self.log_path = directory / "prometheus.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    program,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={directory / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def __enter__(self) -> PrometheusServer:
        wait_for(self._ready, timeout=30.0, interval=0.2, message="Prometheus to start")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _ready(self) -> bool:
        assert self.process.poll() is None, self.log_path.read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def query(self, promql: str) -> float | None:
        """The single value of an instant query, or None when it has no result yet."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        with urllib.request.urlopen(url, timeout=5) as answer:
            payload = json.load(answer)
        assert payload["status"] == "success", payload
        result = payload["data"]["result"]
        return float(result[0]["value"][1]) if result else None
