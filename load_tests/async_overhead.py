"""What an `async def` handler costs on /ping: the async app against the blocking one.

Theory of operation: three one-worker servers run at the same time, all pinned to CPU 1:
`load_tests.apps.ping_async:blocking` (a plain `def` /ping), `:awaited` (the same handler as
`async def`: each request becomes a Task on the worker's asyncio loop and the request's
greenlet waits for it) and `:awaited_sleep` (an `async def` that awaits `asyncio.sleep(0)`
once, so the Task really parks on the loop and is resumed). Each round starts one
`wrk -t1 -c50` per server on CPU 0 at once: the servers share one core for the same seconds,
so whatever else the machine does slows them alike, and the ratio of their request rates is
the ratio of their costs per request. The median ratio async/blocking is the figure of merit
(bar: >= 0.5).

    python load_tests/async_overhead.py [--rounds 3] [--duration 8] [--connections 50]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import HOST, SERVER_CPU, WRK_CPU, free_port, pinned, serve
from load_tests.wrk import WrkRun, run_together

APPS = {
    "blocking": "load_tests.apps.ping_async:blocking",
    "async": "load_tests.apps.ping_async:awaited",
    "async+sleep(0)": "load_tests.apps.ping_async:awaited_sleep",
}


def _argv(app: str, port: int) -> list[str]:
    cli = [sys.executable, "-m", "socketify.cli"]
    return pinned([*cli, "run", app, "--workers", "1", "--bind", f"{HOST}:{port}"], SERVER_CPU)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the apps side by side for --rounds rounds and print the median ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args(argv)
    run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    warm = WrkRun(connections=args.connections, duration=1, cpu=WRK_CPU)
    print(
        f"GET /ping; {', '.join(APPS)} side by side on CPU {SERVER_CPU}, "
        f"one wrk -t1 -c{args.connections} -d{args.duration}s each on CPU {WRK_CPU}"
    )
    ratios: dict[str, list[float]] = {name: [] for name in APPS if name != "blocking"}
    with contextlib.ExitStack() as stack:
        urls = {}
        for name, app in APPS.items():
            port = free_port()
            urls[name] = stack.enter_context(serve(name, _argv(app, port), port)).url
        run_together(warm, urls)
        for number in range(1, args.rounds + 1):
            results = run_together(run, urls)
            for name, result in results.items():
                if result.non_2xx or result.socket_errors.total:
                    print(f"  {name}: {result.non_2xx} non-2xx, {result.socket_errors}")
            base = results["blocking"].requests_per_sec
            line = [f"round {number}: blocking {base:8.0f} req/s"]
            for name in ratios:
                rate = results[name].requests_per_sec
                ratios[name].append(rate / base)
                line.append(f"{name} {rate:8.0f} req/s (ratio {rate / base:.3f})")
            print(", ".join(line), flush=True)
    for name, found in ratios.items():
        print(f"median ratio {name} / blocking: {statistics.median(found):.3f} (bar: >= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
