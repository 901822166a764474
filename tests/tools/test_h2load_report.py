"""`load_tests/h2load.py`: h2load's end-of-run report parsed into figures and problems.

The reports are h2load 1.52 output (nghttp2-client on Debian) with the progress lines cut; a
change in h2load's format must fail here rather than give a benchmark a wrong figure.
"""

from __future__ import annotations

import pytest

from load_tests.h2load import H2loadFailed, H2loadRun, parse_h2load

CLEAN = """\
starting benchmark...
spawning thread #0: 50 total client(s). Timing-based test with 1s of warm-up time and 3s of \
main duration for measurements.
Warm-up started for thread #0.
progress: 100% of clients started
Application protocol: h2c
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 4.00s, 1789.00 req/s, 77.01KB/s
requests: 5367 total, 5367 started, 5367 done, 5367 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 5469 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 231.02KB (236562) total, 41.90KB (42903) headers (space savings 94.34%), \
75.60KB (77418) data
                     min         max         mean         sd        +/- sd
time for request:   173.17ms       1.66s    289.01ms    135.93ms    97.67%
time for connect:        0us         0us         0us         0us     0.00%
time to 1st byte:        0us         0us         0us         0us     0.00%
req/s           :      26.99       36.65       35.76        2.14    90.00%
"""

# An HTTP/1.1-only server answers the preface with a 4xx/5xx status line: h2load still exits 0.
NO_HTTP2 = """\
starting benchmark...
Application protocol: h2c
Main benchmark duration is over for thread #0. Stopping all clients.

finished in 2.00s, 0.00 req/s, 5.00KB/s
requests: 0 total, 500 started, 0 done, 0 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 0 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 10.01KB (10250) total, 0B (0) headers (space savings 0.00%), 0B (0) data
                     min         max         mean         sd        +/- sd
time for request:        0us         0us         0us         0us     0.00%
"""

ERRORS = """\
Application protocol: h2
finished in 850.50ms, 11758.97 req/s, 1.02MB/s
requests: 10000 total, 10000 started, 10000 done, 9990 succeeded, 10 failed, 4 errored, 1 timeout
status codes: 9990 2xx, 0 3xx, 0 4xx, 6 5xx
traffic: 1.10MB (1153433) total, 200.00KB (204800) headers (space savings 90.00%), \
107.42KB (110000) data
"""


def test_clean_report_gives_the_rate_counts_bytes_and_protocol() -> None:
    result = parse_h2load(CLEAN)
    assert result.requests_per_sec == 1789.0
    assert result.duration_s == 4.0
    assert (result.total, result.started, result.done, result.succeeded) == (5367,) * 4
    assert (result.failed, result.errored, result.timeout) == (0, 0, 0)
    assert (result.status_2xx, result.status_4xx, result.status_5xx) == (5469, 0, 0)
    assert (result.traffic_bytes, result.header_bytes, result.data_bytes) == (236562, 42903, 77418)
    assert result.protocol == "h2c"
    assert result.problem is None


def test_run_where_nothing_succeeded_is_a_problem_not_a_zero_rate() -> None:
    result = parse_h2load(NO_HTTP2)
    assert result.requests_per_sec == 0.0
    assert result.problem == "no request succeeded (500 started, 0 done)"


def test_failed_errored_timeout_and_5xx_are_all_reported() -> None:
    result = parse_h2load(ERRORS)
    assert result.duration_s == pytest.approx(0.8505)
    assert result.protocol == "h2"
    assert result.problem == "10 failed, 4 errored, 1 timeout; 0 4xx and 6 5xx responses"


def test_report_without_protocol_line_has_no_protocol() -> None:
    report = CLEAN.replace("Application protocol: h2c\n", "")
    assert parse_h2load(report).protocol is None


@pytest.mark.parametrize("line", ["finished in", "requests:", "status codes:", "traffic:"])
def test_report_missing_a_figure_line_is_refused(line: str) -> None:
    report = "\n".join(row for row in CLEAN.splitlines() if not row.startswith(line))
    with pytest.raises(H2loadFailed, match="not an h2load report"):
        parse_h2load(report)


def test_command_line_pins_and_sets_clients_streams_duration_and_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    argv = H2loadRun(clients=50, streams=10, duration=8, warmup=1, cpu=0).argv("http://h/ping")
    assert argv == [
        "taskset", "-c", "0", "h2load", "-t", "1", "-c", "50", "-m", "10", "-D", "8s",
        "--warm-up-time=1s", "http://h/ping",
    ]  # fmt: skip


def test_missing_h2load_says_which_package_brings_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(H2loadFailed, match="nghttp2-client"):
        H2loadRun(clients=1, streams=1, duration=1).argv("http://h/ping")
