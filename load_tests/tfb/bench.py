"""Measure every implementation on the six test types; print one table, draw one chart.

Theory of operation. Each round starts the servers one at a time (never two at once: each
holds its own database connections), in an order that rotates between rounds so that a noisy
neighbour hits all alike. A started server is first verified (`verify.verify`; one that fails
is reported and not timed), warmed with a one-second run of each test, then measured with wrk
on each of its tests. With one worker the server is pinned to CPU 1 and wrk to CPU 0; with two
workers neither is pinned. `plaintext` is pipelined 16 deep (load_tests/pipeline.lua), the
rest one request at a time. The table gives the median req/s over the rounds, and the bars'
ratios from the 1-worker runs.
"""

from __future__ import annotations

import datetime
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from load_tests.harness import HOST, LOAD_TESTS, SERVER_CPU, WRK_CPU, free_port, pinned, serve
from load_tests.tfb.contenders import IMPLEMENTATIONS, SERVERS, Implementation
from load_tests.tfb.verify import PATHS, TEST_TYPES, Target, verify
from load_tests.wrk import WrkFailed, WrkRun

__all__ = ["BARS", "Bench", "Results", "bars", "render_table"]

QUERIES = "20"  # the `queries` of the timed queries and updates runs
PIPELINE = {"plaintext": 16}
RESULTS = LOAD_TESTS / "results"
# (implementation, over, tests, at least): ours against the fastest peer.
BARS = (
    ("ours-raw", "starlette", ("db", "queries", "fortunes", "updates"), 1.5),
    ("ours-pony", "starlette", ("db", "queries", "fortunes", "updates"), 1.0),
    ("ours-pony", "socketify.py", ("json", "plaintext"), 1.0),
)


@dataclass
class Results:
    """req/s per (workers, implementation, test), one value per round."""

    runs: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, workers: int, name: str, test: str, rps: float) -> None:
        """Record one run."""
        per_impl = self.runs.setdefault(str(workers), {}).setdefault(name, {})
        per_impl.setdefault(test, []).append(rps)

    def median(self, workers: int, name: str, test: str) -> float | None:
        """The median req/s, None when not measured."""
        values = self.runs.get(str(workers), {}).get(name, {}).get(test)
        return statistics.median(values) if values else None


@dataclass
class Bench:
    """What to run: which implementations, tests, worker counts, and for how long."""

    implementations: list[Implementation]
    tests: tuple[str, ...] = TEST_TYPES
    workers: tuple[int, ...] = (1, 2)
    rounds: int = 2
    duration: int = 5
    connections: int = 50
    results: Results = field(default_factory=Results)

    def run(self) -> Results:
        """Every round, every worker count, every server; returns the results."""
        servers = list(dict.fromkeys(i.server for i in self.implementations))
        for round_number in range(self.rounds):
            order = servers[round_number % len(servers) :] + servers[: round_number % len(servers)]
            for workers in self.workers:
                for server in order:
                    self._measure_server(server, workers, round_number)
        return self.results

    def _measure_server(self, server_name: str, workers: int, round_number: int) -> None:
        server = SERVERS[server_name]
        port = free_port()
        argv = server.command(port, workers)
        if workers == 1:
            argv = pinned(argv, SERVER_CPU)
        implementations = [i for i in self.implementations if i.server == server_name]
        first_test = next(t for t in implementations[0].tests)
        ready = implementations[0].prefix + PATHS[first_test].partition("?")[0]
        cwd = {"cwd": server.cwd} if server.cwd is not None else {}
        with serve(server_name, argv, port, ready_path=ready, **cwd) as running:
            base = f"http://{HOST}:{running.port}"
            # All of a server's implementations are verified before any is timed: requests
            # still running after a timed `updates` would write under the verifier's reads.
            for impl in implementations:
                if round_number == 0 and workers == self.workers[0]:
                    self._verify(impl, base)
            for impl in implementations:
                if impl.name in self.results.failures:
                    continue
                for test in (t for t in self.tests if t in impl.tests):
                    url = base + Target(impl.name, base, impl.prefix).url(test, QUERIES)
                    self._wrk(test, url, 1, workers)  # warm-up
                    result = self._wrk(test, url, self.duration, workers)
                    if result is None:
                        continue
                    rps, bad = result
                    self.results.add(workers, impl.name, test, rps)
                    if bad:
                        errors = self.results.errors.setdefault(impl.name, {})
                        errors[test] = errors.get(test, 0) + bad
                    note = f" ({bad} errors)" if bad else ""
                    print(
                        f"  round {round_number + 1} w{workers} {impl.name:13} {test:9}"
                        f" {rps:>10,.0f} req/s{note}",
                        flush=True,
                    )

    def _verify(self, impl: Implementation, base: str) -> None:
        tests = tuple(t for t in self.tests if t in impl.tests)
        problems = verify(Target(impl.name, base, impl.prefix), tests)
        if problems:
            self.results.failures[impl.name] = problems
            print(f"  {impl.name}: FAILED verification, not timed:", flush=True)
            for problem in problems[:10]:
                print(f"    {problem}", flush=True)

    def _wrk(self, test: str, url: str, duration: int, workers: int) -> tuple[float, int] | None:
        run = WrkRun(
            connections=self.connections,
            duration=duration,
            cpu=WRK_CPU if workers == 1 else None,
            pipeline=PIPELINE.get(test, 1),
        )
        try:
            result = run.run(url)
        except WrkFailed as exc:
            print(f"  wrk failed on {url}: {exc}", flush=True)
            return None
        bad = result.non_2xx + result.socket_errors.total
        return result.requests_per_sec, bad


def bars(results: Results, workers: int = 1) -> list[tuple[str, float | None, float, bool]]:
    """Each bar as (what, ratio or None when unmeasured, at least, met)."""
    rows = []
    for ours, peer, tests, least in BARS:
        for test in tests:
            rows.append(_ratio_row(results, workers, ours, peer, test, least))
    return rows


def _ratio_row(
    results: Results, workers: int, ours: str, peer: str, test: str, least: float
) -> tuple[str, float | None, float, bool]:
    mine, theirs = results.median(workers, ours, test), results.median(workers, peer, test)
    ratio = mine / theirs if mine and theirs else None
    label = f"{ours} / {peer} on {test}"
    return label, ratio, least, ratio is not None and ratio >= least


def render_table(results: Results, names: Iterable[str], tests: Iterable[str]) -> str:
    """The table: one block per worker count, a row per test, a column per implementation."""
    names, tests = list(names), list(tests)
    lines = []
    for workers in sorted(results.runs, key=int):
        lines.append(
            f"\n{workers} worker{'s' if workers != '1' else ''}"
            f"{' (pinned to CPU 1, wrk on CPU 0)' if workers == '1' else ''}, median req/s"
        )
        lines.append(f"{'test':10}" + "".join(f"{name:>14}" for name in names))
        for test in tests:
            cells = []
            for name in names:
                value = results.median(int(workers), name, test)
                cells.append(f"{value:>14,.0f}" if value is not None else f"{'-':>14}")
            label = f"{test}={QUERIES}" if test in ("queries", "updates") else test
            lines.append(f"{label:10}" + "".join(cells))
    for workers in sorted(results.runs, key=int):
        lines.append(f"\nRatios, {workers} worker{'s' if workers != '1' else ''}:")
        for label, ratio, least, met in bars(results, int(workers)):
            shown = f"{ratio:.2f}x" if ratio is not None else "n/a"
            verdict = "(reported)" if least == 0 else ("MET" if met else "MISSED")
            target = f">= {least:.1f}x" if least else ""
            lines.append(f"  {label:42} {shown:>8} {target:>8} {verdict}")
    for name, problems in results.failures.items():
        lines.append(f"\n{name} failed verification ({len(problems)} problems), not timed")
    for name, errors in results.errors.items():
        lines.append(f"{name}: non-2xx or socket errors {errors}")
    return "\n".join(lines)


def save(bench: Bench, table: str, command: str) -> tuple[Path, Path | None]:
    """Write the results as JSON and the chart as PNG under load_tests/results."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(exist_ok=True)
    data: dict[str, Any] = {
        "command": command,
        "rounds": bench.rounds,
        "duration_s": bench.duration,
        "connections": bench.connections,
        "queries": QUERIES,
        "runs": bench.results.runs,
        "failures": bench.results.failures,
        "errors": bench.results.errors,
        "table": table,
    }
    json_path = RESULTS / f"tfb-c{bench.connections}-{stamp}.json"
    json_path.write_text(json.dumps(data, indent=1))
    chart_path = RESULTS / f"tfb-c{bench.connections}-{stamp}.png"
    return json_path, (chart_path if draw(bench, chart_path) else None)


def draw(bench: Bench, path: Path) -> bool:
    """One chart: a panel per worker count, a group of bars per test; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)")
        return False
    results = bench.results
    names = [i.name for i in bench.implementations]
    panels = sorted(results.runs, key=int)
    figure, axes = plt.subplots(len(panels), 1, figsize=(12, 4.5 * len(panels)), squeeze=False)
    width = 0.8 / len(names)
    for axis, workers in zip(axes[:, 0], panels, strict=True):
        for n, name in enumerate(names):
            values = [results.median(int(workers), name, t) or 0 for t in bench.tests]
            positions = [t + (n - (len(names) - 1) / 2) * width for t in range(len(bench.tests))]
            axis.bar(positions, values, width, label=IMPLEMENTATIONS[name].label)
        axis.set_yscale("log")
        axis.set_xticks(range(len(bench.tests)))
        labels = [f"{t}={QUERIES}" if t in ("queries", "updates") else t for t in bench.tests]
        axis.set_xticklabels(labels)
        axis.set_ylabel("req/s (log scale)")
        pinned_note = ", pinned" if workers == "1" else ""
        axis.set_title(
            f"TechEmpower test types, {workers} worker(s){pinned_note}, c={bench.connections}"
        )
        axis.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True
