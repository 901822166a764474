"""Workers' recordings rebuilt and rendered by the master, without processes or sockets."""

from __future__ import annotations

import pytest

from socketify import Server
from socketify.metrics import Counter, Gauge, Histogram
from socketify.metrics.families import Family, decode_family, decode_series, series_key
from socketify.metrics.recorder import Recorder
from socketify.metrics.request_metrics import RequestMetrics
from socketify.testing import TestClient
from tests.support.services import require_module
from workers.shared.tally import TallyTable
from workers.supervise.status import MasterStatus

parser = require_module("prometheus_client.parser", "pip install prometheus_client")
from socketify.metrics.exposition import Exposition  # noqa: E402


def render(table: TallyTable) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    page = Exposition(table).render(MasterStatus("running", False), {}).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(page)
        for s in family.samples
    }


def test_a_histogram_is_cumulative_and_its_count_is_its_observations() -> None:
    table = TallyTable(capacity=2)
    family = Family("job_seconds", "histogram", "Jobs", (), (0.1, 1.0))
    for index, values in ((0, (0.05, 0.5)), (1, (5.0, 0.1))):
        recorder = Recorder(table.writer(index))
        for value in values:
            recorder.observe(family, value)
    samples = render(table)
    assert samples[("job_seconds_bucket", (("le", "0.1"),))] == 2  # 0.1 is "<= 0.1"
    assert samples[("job_seconds_bucket", (("le", "1.0"),))] == 3
    assert samples[("job_seconds_bucket", (("le", "+Inf"),))] == 4
    assert samples[("job_seconds_count", ())] == 4
    assert samples[("job_seconds_sum", ())] == pytest.approx(5.65)


def test_request_counts_use_route_patterns_and_one_label_for_every_unmatched_path() -> None:
    table = TallyTable(capacity=1)
    recorder = Recorder(table.writer(0))
    app = Server()
    app.get("/users/:id", lambda req, res: res.send("ok"))
    app.instrument(RequestMetrics(recorder))
    client = TestClient(app)
    for user in range(5):
        client.get(f"/users/{user}")
    assert client.post("/users/1").status == 405
    client.get("/wp-login.php")
    client.get("/.env")
    samples = render(table)
    total = "socketify_http_requests_total"
    labels = (("method", "GET"), ("route", "/users/:id"), ("status", "200"))
    assert samples[(total, labels)] == 5
    refused = (("method", "POST"), ("route", "<unmatched>"), ("status", "405"))
    assert samples[(total, refused)] == 1
    scan = (("method", "GET"), ("route", "<unmatched>"), ("status", "404"))
    assert samples[(total, scan)] == 2
    assert samples[("socketify_http_requests_in_flight", ())] == 0


def test_user_metrics_check_their_labels_and_direction() -> None:
    orders = Counter("test_orders_total", "Orders", labels=("kind",))
    with pytest.raises(ValueError, match="labels"):
        orders.inc(colour="red")
    with pytest.raises(ValueError, match="only goes up"):
        orders.inc(-1, kind="gift")
    with pytest.raises(ValueError, match="invalid metric name"):
        Gauge("bad name", "no spaces")
    with pytest.raises(ValueError, match="increasing"):
        Histogram("test_latency", "Latency", buckets=(1.0, 0.5))


def test_keys_not_written_by_families_are_ignored() -> None:
    assert decode_family(b"f{not json") is None
    assert decode_series(b"s[1, 2") is None
    assert decode_series(series_key("a", ("x",))) == ("a", ("x",))
