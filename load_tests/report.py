"""Turn /ping measurements into a text table and a JSON record (`charts.py` draws it).

Every ratio puts ours on the side that makes "bigger is better for us" read naturally:
`ours÷them req/s` is our req/s over that server's (bars: ≥1.0 vs uvicorn-asgi, ≥4.0 vs
gunicorn-gevent-flask) and `ours÷them p99` is our p99 over theirs (≤1.0 means ours is lower).
Pipelining and worker scaling are ratios of a server to itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from load_tests.contenders import OURS
from load_tests.harness import RawResponse
from load_tests.wrk import WrkResult


@dataclass(frozen=True)
class Measurement:
    """One server at one worker count: its wrk figures, or why there are none."""

    server: str
    workers: int
    pinning: str
    response: RawResponse | None = None
    result: WrkResult | None = None
    unpipelined: WrkResult | None = None  # --pipeline only: the same server without pipelining
    error: str | None = None


@dataclass(frozen=True)
class Column:
    """A table column: its header and how to format one row, given all rows for ratios."""

    header: str
    cell: Callable[[Measurement, Sequence[Measurement]], str]


def ratios(m: Measurement, all_rows: Sequence[Measurement]) -> dict[str, float | None]:
    """The ratios of one row: against ours at the same worker count, and against itself."""
    ours = _find(all_rows, OURS, m.workers)
    one_worker = _find(all_rows, m.server, 1)
    result = m.result
    return {
        "ours_over_them_rps": _div(_rps(ours), _rps(m)),
        "ours_over_them_p99": _div(
            ours.result.p99_ms if ours and ours.result else None,
            result.p99_ms if result else None,
        ),
        "pipelined_over_unpipelined": _div(
            result.requests_per_sec if result else None,
            m.unpipelined.requests_per_sec if m.unpipelined else None,
        ),
        "over_one_worker_rps": _div(_rps(m), _rps(one_worker)) if m.workers > 1 else None,
    }


def render_table(rows: Sequence[Measurement], *, fairness: bool, pipeline: int) -> str:
    """A fixed-width table of rows, with a legend for the ratio columns."""
    columns = _columns(rows, fairness=fairness, pipeline=pipeline)
    table = [[c.header for c in columns]]
    table += [[c.cell(m, rows) for c in columns] for m in rows if not m.error]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    widths[0] = max(widths[0], *(len(m.server) for m in rows))

    def line(cells: list[str]) -> str:
        return "  ".join(
            text.ljust(width) if i == 0 else text.rjust(width)
            for i, (text, width) in enumerate(zip(cells, widths, strict=False))
        )

    lines = [line(table[0]), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    lines += [line(cells) for cells in table[1:]]
    lines += [line([m.server, str(m.workers), f"FAILED: {headline(m.error)}"]).rstrip()
              for m in rows if m.error]  # fmt: skip
    return "\n".join([*lines, "", *_legend(columns)])


def headline(error: str) -> str:
    """One line for an error: its first line and, when it carries a log, the log's last line."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')}: {lines[-1]}"


def to_json(scenario: str, meta: dict[str, Any], rows: Sequence[Measurement]) -> str:
    """The JSON record of a run: scenario, conditions, and per-server figures and ratios."""
    results = []
    for m in rows:
        record = asdict(m)
        if m.response:
            record["response"] = {
                "bytes": m.response.size,
                "status_line": m.response.status_line,
                "header_names": m.response.header_names,
                "raw": m.response.raw.decode("latin-1"),
            }
        record["ratios"] = ratios(m, rows)
        results.append(record)
    return json.dumps({"scenario": scenario, "meta": meta, "results": results}, indent=2)


def save(directory: Path, stem: str, json_text: str) -> Path:
    """Write <stem>.json into directory (`load_tests/charts.py` draws it); return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / f"{stem}.json"
    json_path.write_text(json_text + "\n")
    return json_path


def _columns(rows: Sequence[Measurement], *, fairness: bool, pipeline: int) -> list[Column]:
    def figure(get: Callable[[WrkResult], str]) -> Callable[[Measurement, Any], str]:
        return lambda m, _rows: get(m.result) if m.result else "-"

    def ratio(key: str) -> Callable[[Measurement, Sequence[Measurement]], str]:
        return lambda m, all_rows: _times(ratios(m, all_rows)[key])

    columns = [
        Column("server", lambda m, _rows: m.server),
        Column("w", lambda m, _rows: str(m.workers)),
        Column("bytes/resp", lambda m, _rows: str(m.response.size) if m.response else "-"),
        Column("req/s", figure(lambda r: f"{r.requests_per_sec:,.0f}")),
        Column("p50 ms", figure(lambda r: _ms(r.p50_ms))),
        Column("p99 ms", figure(lambda r: _ms(r.p99_ms))),
        Column("sock err c/r/w/t", figure(_socket_errors)),
        Column("non-2xx", figure(lambda r: str(r.non_2xx))),
        Column("ours÷them req/s", ratio("ours_over_them_rps")),
    ]
    if fairness:
        columns.append(Column("ours÷them p99", ratio("ours_over_them_p99")))
    if pipeline > 1:
        columns.append(
            Column(
                "un-pipelined req/s",
                lambda m, _rows: f"{m.unpipelined.requests_per_sec:,.0f}" if m.unpipelined else "-",
            )
        )
        columns.append(Column(f"pipe{pipeline}÷un-pipelined", ratio("pipelined_over_unpipelined")))
    if any(m.workers > 1 for m in rows) and any(m.workers == 1 for m in rows):
        columns.append(Column("÷ w1 req/s", ratio("over_one_worker_rps")))
    return columns


def _legend(columns: Sequence[Column]) -> list[str]:
    explained = {
        "ours÷them req/s": "our req/s ÷ this server's req/s, same worker count "
        "(bars: ≥1.0 vs uvicorn-asgi, ≥4.0 vs gunicorn-gevent-flask)",
        "ours÷them p99": "our p99 ÷ this server's p99 (bar: ≤1.0 vs uvicorn-asgi, no timeouts)",
        "sock err c/r/w/t": "wrk socket errors: connect/read/write/timeout (timeout = no "
        "response within wrk's 2 s)",
        "÷ w1 req/s": "req/s ÷ the same server's 1-worker req/s (bar for ours: ≥1.2)",
    }
    headers = [c.header for c in columns]
    lines = [f"  {h}: {explained[h]}" for h in headers if h in explained]
    if any(h.endswith("÷un-pipelined") for h in headers):
        lines.append(
            "  pipeN÷un-pipelined: pipelined req/s ÷ the same server un-pipelined "
            "(bar for ours: ≥2.5)"
        )
        lines.append(
            "  p50/p99 when pipelined: wrk times a whole batch, once per batch, and its "
            "percentiles are unreliable (0.000 appears); judge pipelining by req/s"
        )
    return lines


def _find(rows: Sequence[Measurement], server: str, workers: int) -> Measurement | None:
    return next((m for m in rows if m.server == server and m.workers == workers), None)


def _rps(m: Measurement | None) -> float | None:
    return m.result.requests_per_sec if m and m.result else None


def _div(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _times(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _socket_errors(result: WrkResult) -> str:
    errors = result.socket_errors
    return f"{errors.connect}/{errors.read}/{errors.write}/{errors.timeout}"
