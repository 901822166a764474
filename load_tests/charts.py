"""Charts of the stored results, drawn with matplotlib: one PNG and one SVG per JSON record.

    python load_tests/charts.py                       # every record in load_tests/results/
    python load_tests/charts.py results/ping-*.json   # some records

Each kind of record (/ping, WebSocket echo, HTTP/2, HTTPS, database) becomes one horizontal
bar chart: requests (or messages) per second per server, ours in orange, the peers in blue and
reference lines in grey, each bar labelled with its figure and, for a peer, ours over theirs.
The records keep every figure; a chart shows the median of a run's rounds where there are
rounds. matplotlib is needed here only (`pip install matplotlib`); the
benchmarks themselves never import it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).resolve().parent / "results"
OURS_COLOUR = "#d9480f"
PEER_COLOUR = "#4263eb"
REFERENCE_COLOUR = "#868e96"


@dataclass(frozen=True)
class Bar:
    """One bar: its label, its value, and what it is (ours, a peer, or a reference line)."""

    label: str
    value: float
    kind: str = "peer"  # "ours", "peer" or "reference"
    note: str = ""


@dataclass(frozen=True)
class Chart:
    """What one record shows: a title, a subtitle saying how it was measured, and the bars."""

    title: str
    subtitle: str
    unit: str
    bars: tuple[Bar, ...]


def ping_chart(record: dict[str, Any]) -> Chart:
    """A `run_http.py` record: req/s per server and worker count, p99 and ours over theirs."""
    meta = record["meta"]
    rows = [row for row in record["results"] if row.get("result")]
    ours = {row["workers"]: row["result"]["requests_per_sec"] for row in rows if _is_ours(row)}
    bars = []
    for row in rows:
        result = row["result"]
        rate = result["requests_per_sec"]
        note = f"p99 {result['p99_ms']:g} ms"
        if not _is_ours(row) and row["workers"] in ours:
            note += f" · ours {ours[row['workers']] / rate:.2f}x"
        bars.append(Bar(f"{row['server']} (w{row['workers']})", rate, _kind(row["server"]), note))
    pipeline = meta.get("pipeline", 1)
    how = f"wrk -t1 -c{meta['connections']} -d{meta['duration_s']}s"
    how += f", {pipeline} pipelined" if pipeline > 1 else ""
    return Chart(
        f"GET {meta.get('endpoint', '/ping')}: {record['scenario']}",
        f"{how}; {_machine(meta)}; {meta['started'][:10]}",
        "requests per second",
        tuple(bars),
    )


def websocket_echo_chart(record: dict[str, Any]) -> Chart:
    """A `bench_websocket_echo.py` record: messages/s per server (the best of its rounds is
    kept as measured; the chart shows the median)."""
    servers = record["servers"]
    ours = statistics.median(servers["socketify"]["rounds_msgs_per_sec"])
    bars = []
    for name, figures in servers.items():
        rate = statistics.median(figures["rounds_msgs_per_sec"])
        note = f"p99 {figures['p99_ms']:.1f} ms"
        if name != "socketify":
            note += f" · ours {ours / rate:.2f}x"
        bars.append(Bar(name, rate, _kind(name), note))
    return Chart(
        f"WebSocket echo: {record['connections']} connections x {record['payload_bytes']} B",
        f"median of {record['rounds']} rounds of {record['duration_s']:g}s, "
        f"{record['pinning']}; {record['cpu_cores']} cores; {record['started'][:10]}",
        "messages per second",
        tuple(bars),
    )


def http2_chart(record: dict[str, Any]) -> Chart:
    """A `bench_http2.py` record: each target's median rate over its rounds."""
    bars = []
    for target in record["targets"]:
        rates = [r["rate"] for r in target.get("rounds", []) if r.get("rate")]
        if not rates:
            continue
        kind = "ours" if target["server"].startswith("ours") else "peer"
        bars.append(Bar(target["label"], statistics.median(rates), kind))
    meta = record["meta"]
    return Chart(
        "HTTP/2: h2c, TLS h2 and HTTP/1.1",
        f"median of {meta['rounds']} rounds of {meta['duration_s']}s, {meta['pinning']}; "
        f"{meta['cpu_cores']} cores; {meta['started'][:10]}",
        "requests per second",
        tuple(bars),
    )


def https_chart(record: dict[str, Any]) -> Chart:
    """An `https_vs_http.py` record: ours over plain HTTP and TLS, and the peer over TLS.

    The ratios are medians of each round's ratio (the targets of a round ran back to back), as
    the benchmark prints them, not ratios of the medians.
    """
    targets = record["targets"]
    labels = {"http": ("socketify, plain HTTP", "reference"), "https": ("socketify, TLS", "ours")}

    def rates(name: str) -> list[float]:
        return [r["requests_per_sec"] for r in targets[name]]

    def paired(numerator: str, denominator: str) -> float:
        pairs = zip(rates(numerator), rates(denominator), strict=True)
        return statistics.median(a / b for a, b in pairs)

    bars = []
    for name in targets:
        label, kind = labels.get(name, (f"{name}, TLS", "peer"))
        note = ""
        if name == "https":
            note = f"{paired('https', 'http'):.2f}x our plain HTTP"
        elif name != "http":
            note = f"ours {paired('https', name):.2f}x"
        bars.append(Bar(label, statistics.median(rates(name)), kind, note))
    return Chart(
        f"GET /ping over TLS 1.3 ({record['key']} key), keep-alive",
        f"median of {record['rounds']} rounds of {record['duration_s']}s, "
        f"wrk -t1 -c{record['connections']}, {record['pinning']}; "
        f"{record['cpu_cores']} cores; {record['started'][:10]}",
        "requests per second",
        tuple(bars),
    )


def database_chart(record: dict[str, Any]) -> Chart:
    """A `run_db.py` record: per engine, /ping, the ORM read, `get_row` and the bare driver."""
    bars = []
    for engine, figures in record["engines"].items():
        if not figures.get("fast_path", True):
            continue  # the plain-Pony server is in the record, not on the headline chart
        rounds = figures["rounds"]

        def median_rate(route: str | None, rounds: list[dict[str, Any]] = rounds) -> float:
            rates = [r[route]["requests_per_sec"] for r in rounds if route and route in r]
            return statistics.median(rates) if rates else 0.0

        driver = median_rate(figures.get("driver_route"))
        for route, label, kind in (
            ("/ping", "/ping (no database)", "reference"),
            ("/users/1", "User[1] through Pony", "ours"),
            (figures.get("row_route"), "get_row (a dict)", "ours"),
            (figures.get("driver_route"), "the driver alone, no ORM", "reference"),
        ):
            rate = median_rate(route)
            if rate:
                note = f"{rate / driver:.2f}x the driver alone" if kind == "ours" and driver else ""
                bars.append(Bar(f"{engine}: {label}", rate, kind, note))
    return Chart(
        "Database: GET /users/1, one primary-key read per request",
        f"median of {len(rounds)} rounds of {record['duration_s']}s, {record['pinning']}, "
        f"pool {record['pool_size']}; {record['started'][:10]}",
        "requests per second",
        tuple(bars),
    )


def chart_for(record: dict[str, Any]) -> Chart | None:
    """The chart of a record, or None for a kind of record that has no chart."""
    scenario = str(record.get("scenario", ""))
    if "results" in record and "meta" in record:
        return ping_chart(record)
    makers: dict[str, Callable[[dict[str, Any]], Chart]] = {
        "websocket-echo": websocket_echo_chart,
        "http2": http2_chart,
        "db-users": database_chart,
        "https-vs-http": https_chart,
    }
    maker = makers.get(scenario)
    return maker(record) if maker else None


def draw(chart: Chart) -> Any:
    """A matplotlib Figure of the chart's bars, largest first from the top."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small, searchable SVGs
    from matplotlib import pyplot

    colours = {"ours": OURS_COLOUR, "peer": PEER_COLOUR, "reference": REFERENCE_COLOUR}
    bars = list(chart.bars)
    figure, axes = pyplot.subplots(figsize=(10, 1.4 + 0.5 * len(bars)), layout="constrained")
    positions = range(len(bars))
    axes.barh(positions, [bar.value for bar in bars], color=[colours[b.kind] for b in bars])
    axes.set_yticks(list(positions), [bar.label for bar in bars])
    axes.invert_yaxis()
    peak = max((bar.value for bar in bars), default=1.0)
    for position, bar in zip(positions, bars, strict=True):
        text = f" {bar.value:,.0f}" + (f"  ({bar.note})" if bar.note else "")
        axes.text(bar.value, position, text, va="center", fontsize=9)
    axes.set_xlim(0, peak * 1.6)  # room for the labels right of the longest bar
    axes.set_xlabel(chart.unit)
    axes.xaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
    axes.spines[["top", "right"]].set_visible(False)
    figure.suptitle(chart.title, x=0.01, ha="left", fontweight="bold")
    axes.set_title(chart.subtitle, loc="left", fontsize=9, color="#555")
    return figure


def write(record_path: Path) -> list[Path]:
    """Draw the record's chart next to it as <stem>.png and <stem>.svg; [] for no chart."""
    chart = chart_for(json.loads(record_path.read_text()))
    if chart is None or not chart.bars:
        return []
    from matplotlib import pyplot

    figure = draw(chart)
    written = []
    for suffix in (".png", ".svg"):
        path = record_path.with_suffix(suffix)
        # A fixed date and no random ids keep a redrawn SVG identical to the last one.
        metadata = {"Date": None} if suffix == ".svg" else {}
        figure.savefig(path, dpi=110, metadata=metadata)
        written.append(path)
    pyplot.close(figure)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Draw the charts of the given records (default: every record in load_tests/results)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="*", type=Path)
    args = parser.parse_args(argv)
    records: Iterable[Path] = args.records or sorted(RESULTS.glob("*.json"))
    for path in records:
        for written in write(path):
            print(written)
    return 0


def _is_ours(row: dict[str, Any]) -> bool:
    return row["server"] == "socketify"


def _kind(server: str) -> str:
    if server == "socketify":
        return "ours"
    return "reference" if server == "gevent-ceiling" else "peer"


def _machine(meta: dict[str, Any]) -> str:
    return f"{meta.get('cpu_cores', '?')} cores {meta.get('cpu_model', '')}".strip()


if __name__ == "__main__":
    raise SystemExit(main())
