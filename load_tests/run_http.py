"""Benchmark GET /ping: ours against uvicorn, gunicorn + gevent (raw WSGI and Flask), and a
parser-free gevent ceiling, with wrk (on a 2-core machine: wrk and server pinned apart).

Theory of operation: for each worker count, each server in turn is started in its own process
group on a free port, polled until GET /ping answers 200, probed once over a raw socket (bytes
per response, so header equivalence is visible), warmed up, measured with wrk, and stopped
(SIGTERM to the group, SIGKILL after 3 s). `wrk -t1` is always pinned to CPU 0; with 1 worker
the server is pinned to CPU 1, with more the workers are free, so they share CPU 1 and what
wrk leaves of CPU 0. One table is printed and saved as JSON plus an SVG chart in
load_tests/results/. Results are noisy: compare the ratios within one run, not absolute
figures across runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/run_http.py`

from load_tests import charts
from load_tests.contenders import CONTENDERS, Contender, ensure_peers
from load_tests.harness import (
    LOAD_TESTS,
    PING_PATH,
    SERVER_CPU,
    WRK_CPU,
    ServerFailedToStart,
    exit_on_sigterm,
    free_port,
    pinned,
    probe_response,
    serve,
)
from load_tests.report import Measurement, render_table, save, to_json
from load_tests.wrk import WrkFailed, WrkRun

RESULTS = LOAD_TESTS / "results"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected scenario; exit 0 when every server was measured, 1 otherwise."""
    args = _parse_args(argv)
    exit_on_sigterm()
    contenders = [CONTENDERS[name] for name in args.only or CONTENDERS]
    if problem := _prepare(contenders, setup=args.setup):
        print(problem, file=sys.stderr)
        return 2
    scenario = _scenario_name(args)
    print(f"Scenario {scenario}: GET {PING_PATH}, wrk -t1 -c{args.connections} -d{args.duration}s")
    rows = []
    for workers in args.workers:
        print(_pinning_note(workers))
        for contender in contenders:
            print(f"  {contender.name} (w{workers}): {contender.description} ...", flush=True)
            rows.append(measure(contender, workers, args))
            print(f"    {_summary(rows[-1])}", flush=True)
    print()
    print(render_table(rows, fairness=args.fairness, pipeline=args.pipeline))
    stem = f"{scenario}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    json_path = save(args.results_dir, stem, to_json(scenario, _meta(args), rows))
    print(f"\nSaved {json_path}")
    try:
        for chart in charts.write(json_path):
            print(f"Saved {chart}")
    except ImportError:
        print("No chart: matplotlib is not installed (pip install matplotlib)")
    print("Results are noisy: compare ratios within one run, not figures across runs.")
    return 1 if any(m.error for m in rows) else 0


def measure(contender: Contender, workers: int, args: argparse.Namespace) -> Measurement:
    """Start one server, probe it, run wrk against it, and stop it."""
    pinned_run = workers == 1
    pinning = f"server cpu {SERVER_CPU}, wrk cpu {WRK_CPU}" if pinned_run else f"wrk cpu {WRK_CPU}"
    port = free_port()
    argv = pinned(contender.command(port, workers), SERVER_CPU if pinned_run else None)
    run = WrkRun(
        connections=args.connections,
        duration=args.duration,
        cpu=WRK_CPU,
        pipeline=args.pipeline,
    )
    try:
        with serve(contender.name, argv, port) as server:
            response = probe_response(port)
            if args.warmup:
                replace(run, duration=args.warmup, pipeline=1).run(server.url)
            unpipelined = replace(run, pipeline=1).run(server.url) if args.pipeline > 1 else None
            result = run.run(server.url)
    except (ServerFailedToStart, WrkFailed, OSError, ValueError) as error:
        return Measurement(contender.name, workers, pinning, error=str(error))
    return Measurement(contender.name, workers, pinning, response, result, unpipelined)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Scenarios: default c=50; --fairness (c=256, watch p99 and wrk timeouts); "
        "--pipeline 16 (also runs un-pipelined for the ratio); --workers 1,2 (scaling). "
        "See load_tests/README.md.",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(CONTENDERS),
        metavar="SERVER",
        help=f"run only this server (repeatable): {', '.join(CONTENDERS)}",
    )
    parser.add_argument(
        "--connections", type=int, help="wrk -c (default 50, or 256 with --fairness)"
    )
    parser.add_argument("--duration", type=int, default=10, help="wrk seconds (default 10)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="discarded wrk seconds first (default 1; 0: none)"
    )
    parser.add_argument(
        "--fairness", action="store_true", help="256 connections: p99 and wrk timeouts matter"
    )
    parser.add_argument(
        "--pipeline",
        type=int,
        default=1,
        metavar="DEPTH",
        help="requests per write via load_tests/pipeline.lua, e.g. 16 (default 1: off)",
    )
    parser.add_argument(
        "--workers",
        type=_worker_counts,
        default=[1],
        help="worker counts, e.g. 1, 2 or 1,2 (1: pinned; more: unpinned)",
    )
    parser.add_argument(
        "--setup",
        action="store_true",
        help="create load_tests/.venv and install the peer servers into it first",
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.connections is None:
        args.connections = 256 if args.fairness else 50
    return args


def _worker_counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",")]
    if any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError("worker counts must be ≥ 1")
    return counts


def _prepare(contenders: Sequence[Contender], *, setup: bool) -> str | None:
    """Make sure the peers and the two pinned CPUs are available; return what is wrong."""
    if problem := ensure_peers(contenders, setup=setup):
        return problem
    if not {SERVER_CPU, WRK_CPU} <= os.sched_getaffinity(0):
        return f"1-worker runs pin to CPUs {WRK_CPU} and {SERVER_CPU}; this process cannot use both"
    return None


def _scenario_name(args: argparse.Namespace) -> str:
    parts = ["fairness" if args.fairness else "ping"]
    if args.pipeline > 1:
        parts.append(f"pipeline{args.pipeline}")
    parts += [f"c{args.connections}", "w" + "+".join(map(str, args.workers))]
    return "-".join(parts)


def _pinning_note(workers: int) -> str:
    if workers == 1:
        return (
            f"1 worker: each server (master and worker) pinned to CPU {SERVER_CPU} with taskset, "
            f"wrk -t1 pinned to CPU {WRK_CPU}."
        )
    return (
        f"{workers} workers: wrk -t1 pinned to CPU {WRK_CPU}, workers free; wrk needs most of "
        f"a core, so on {os.cpu_count()} cores expect well under {workers}x one worker."
    )


def _summary(m: Measurement) -> str:
    if m.error:
        return f"FAILED: {m.error}"
    assert m.response and m.result  # set together by measure()
    headers = ", ".join(m.response.header_names)
    line = f"{m.response.size} B/response [{m.response.status_line}; {headers}]"
    line += f" → {m.result.requests_per_sec:,.0f} req/s, p99 {m.result.p99_ms:.3f} ms"
    if m.unpipelined:
        line += f" (un-pipelined {m.unpipelined.requests_per_sec:,.0f} req/s)"
    return line


def _meta(args: argparse.Namespace) -> dict[str, object]:
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
    return {
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "endpoint": PING_PATH,
        "tool": wrk_version.splitlines()[0] if wrk_version else "wrk",
        "wrk_threads": 1,
        "wrk_timeout": "2s (wrk default)",
        "connections": args.connections,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "pipeline": args.pipeline,
        "workers": args.workers,
        "pinning": {"1 worker": f"server cpu {SERVER_CPU}, wrk cpu {WRK_CPU}", "more": "none"},
        "cpu_cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
