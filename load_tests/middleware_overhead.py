"""What logging + request_id + CORS cost on /ping: the stacked app against the bare one.

Theory of operation: both apps run at the same time, `socketify run
load_tests.apps.ping_middleware:bare` and `...:stacked`, one worker each, both pinned to CPU 1
(the access log goes to the server's stderr, which the harness sends to a file, as in
production). Each round starts two `wrk -t1 -c50` on CPU 0 at once, one per server, with an
`Origin` header so CORS does its work. Because the two servers share one core for the same
seconds, whatever else the machine is doing slows both alike: the ratio of their request
rates is the ratio of their costs per request, even on a busy shared box where rates measured
one after the other swing by 2x. The median ratio stacked/bare is the figure of merit.

    python load_tests/middleware_overhead.py [--rounds 3] [--duration 8] [--connections 50]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import (
    HOST,
    SERVER_CPU,
    WRK_CPU,
    child_pids,
    cpu_seconds,
    free_port,
    pinned,
    serve,
)
from load_tests.wrk import WrkRun, run_together

APPS = {
    "bare": "load_tests.apps.ping_middleware:bare",
    "stacked": "load_tests.apps.ping_middleware:stacked",
}


class _OriginRun(WrkRun):
    """wrk with an `Origin` header on every request (wrk -H)."""

    def argv(self, url: str) -> list[str]:
        """The wrk command line, with the header added before the URL."""
        command = super().argv(url)
        return [*command[:-1], "-H", "Origin: https://bench.example", command[-1]]


def _argv(app: str, port: int) -> list[str]:
    cli = [sys.executable, "-m", "socketify.cli"]
    return pinned([*cli, "run", app, "--workers", "1", "--bind", f"{HOST}:{port}"], SERVER_CPU)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both apps side by side for --rounds rounds and print the median ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args(argv)
    run = _OriginRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    warm = _OriginRun(connections=args.connections, duration=1, cpu=WRK_CPU)
    print(
        f"GET /ping with Origin; bare and stacked side by side on CPU {SERVER_CPU}, "
        f"two wrk -t1 -c{args.connections} -d{args.duration}s on CPU {WRK_CPU}"
    )
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    with contextlib.ExitStack() as stack:
        urls = {}
        workers = {}
        for name, app in APPS.items():
            port = free_port()
            server = stack.enter_context(serve(name, _argv(app, port), port))
            urls[name] = server.url
            (workers[name],) = child_pids(server.pid)  # --workers 1
        run_together(warm, urls)
        for number in range(1, args.rounds + 1):
            before = {name: cpu_seconds(pid) for name, pid in workers.items()}
            results = run_together(run, urls)
            cpu_us = {
                name: 1e6 * (cpu_seconds(pid) - before[name]) / results[name].requests
                for name, pid in workers.items()
            }
            bare, stacked = results["bare"], results["stacked"]
            for name, result in results.items():
                if result.non_2xx or result.socket_errors.total:
                    print(f"  {name}: {result.non_2xx} non-2xx, {result.socket_errors}")
            ratio = stacked.requests_per_sec / bare.requests_per_sec
            ratios.append(ratio)
            cpu_ratios.append(cpu_us["bare"] / cpu_us["stacked"])
            print(
                f"round {number}: bare {bare.requests_per_sec:8.0f} req/s "
                f"(p99 {bare.p99_ms:.1f} ms), stacked {stacked.requests_per_sec:8.0f} req/s "
                f"(p99 {stacked.p99_ms:.1f} ms), ratio {ratio:.3f}; worker CPU per request "
                f"{cpu_us['bare']:.1f} / {cpu_us['stacked']:.1f} us, ratio {cpu_ratios[-1]:.3f}",
                flush=True,
            )
    print(
        f"median ratio logging+request_id+cors / bare: {statistics.median(ratios):.3f} "
        f"(bar: >= 0.75); by worker CPU per request: {statistics.median(cpu_ratios):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
