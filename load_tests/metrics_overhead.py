"""What `--metrics-bind` costs on /ping: the same app with metrics on against metrics off.

Theory of operation: both servers run at the same time, `socketify run
load_tests.apps.ping:server --workers 1`, one of them with `--metrics-bind`, both pinned to
CPU 1. Each round starts two `wrk -t1 -c50` on CPU 0 at once, one per server; sharing one core
for the same seconds, both are slowed alike by whatever else the machine does, so the ratio
of their request rates is the ratio of their costs per request. The median ratio on/off is
the figure of merit (bar: >= 0.85). A scrape of /metrics at the end checks every request
was counted.

    python load_tests/metrics_overhead.py [--rounds 5] [--duration 8] [--connections 50]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import urllib.request
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

APP = "load_tests.apps.ping:server"


def _argv(port: int, metrics_port: int | None) -> list[str]:
    cli = [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", "1"]
    cli += ["--bind", f"{HOST}:{port}"]
    if metrics_port is not None:
        cli += ["--metrics-bind", f"{HOST}:{metrics_port}"]
    return pinned(cli, SERVER_CPU)


def _counted(metrics_port: int) -> float:
    url = f"http://{HOST}:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        page = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in page.splitlines()
        if line.startswith("socketify_http_requests_total{")
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both servers side by side for --rounds rounds and print the median ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args(argv)
    run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    warm = WrkRun(connections=args.connections, duration=1, cpu=WRK_CPU)
    print(
        f"GET /ping; metrics off and on side by side on CPU {SERVER_CPU}, "
        f"two wrk -t1 -c{args.connections} -d{args.duration}s on CPU {WRK_CPU}"
    )
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    served = 0
    metrics_port = free_port()
    with contextlib.ExitStack() as stack:
        urls = {}
        workers = {}
        for name, metrics in (("off", None), ("on", metrics_port)):
            port = free_port()
            server = stack.enter_context(serve(name, _argv(port, metrics), port))
            urls[name] = server.url
            (workers[name],) = child_pids(server.pid)  # --workers 1
        served += run_together(warm, urls)["on"].requests
        for number in range(1, args.rounds + 1):
            before = {name: cpu_seconds(pid) for name, pid in workers.items()}
            results = run_together(run, urls)
            served += results["on"].requests
            cpu_us = {
                name: 1e6 * (cpu_seconds(pid) - before[name]) / results[name].requests
                for name, pid in workers.items()
            }
            off, on = results["off"], results["on"]
            ratio = on.requests_per_sec / off.requests_per_sec
            ratios.append(ratio)
            cpu_ratios.append(cpu_us["off"] / cpu_us["on"])
            print(
                f"round {number}: off {off.requests_per_sec:8.0f} req/s (p99 {off.p99_ms:.1f} ms),"
                f" on {on.requests_per_sec:8.0f} req/s (p99 {on.p99_ms:.1f} ms), ratio "
                f"{ratio:.3f}; worker CPU per request {cpu_us['off']:.1f} / {cpu_us['on']:.1f} us,"
                f" ratio {cpu_ratios[-1]:.3f}",
                flush=True,
            )
        counted = _counted(metrics_port)
    print(
        f"median ratio metrics on / off: {statistics.median(ratios):.3f} (bar: >= 0.85); "
        f"by worker CPU per request: {statistics.median(cpu_ratios):.3f}; /metrics counted "
        f"{counted:.0f} requests, wrk read {served} (wrk stops with answers unread)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
