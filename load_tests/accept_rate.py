"""New connections per second: one request per connection, ours against uvicorn and gunicorn.

    python load_tests/accept_rate.py                          # 5 rounds
    python load_tests/accept_rate.py --baseline /path/to/other/checkout

Every request carries `Connection: close`, so each costs an accept, a greenlet, a parse, an
answer and a close: the path the services' acceptor owns. Each round runs every contender
with one worker pinned to CPU 1 and wrk (`-t1 -c32 -d5s`) pinned to CPU 0, one after the
other; the report gives each contender's median requests per second and its ratio to
uvicorn's in the same rounds (gunicorn -k gevent runs too, the closest peer in design).
`--baseline DIR` adds ours from another checkout (its `socketify` package first on the
path), to compare two versions side by side.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import CONTENDERS, OURS
from load_tests.harness import HOST, REPO_ROOT, exit_on_sigterm, free_port, pinned, serve
from load_tests.wrk import WrkFailed, parse_wrk

PEER = "uvicorn-asgi"  # what the ratios are to
OTHER_PEERS = ("gunicorn-gevent-wsgi",)
SERVER_CPU, LOAD_CPU = 1, 0


def rate(argv: list[str], port: int, cwd: Path | None = None) -> float:
    """Requests per second wrk gets from `argv` with a new connection per request."""
    with serve(Path(argv[0]).name, pinned(argv, SERVER_CPU), port, cwd=cwd or REPO_ROOT):
        wrk = ["wrk", "-t1", "-c32", "-d5s", "--latency", "-H", "Connection: close"]
        completed = subprocess.run(
            pinned([*wrk, f"http://{HOST}:{port}/ping"], LOAD_CPU), capture_output=True, text=True
        )
    if completed.returncode != 0:
        raise WrkFailed(completed.stderr or completed.stdout)
    return parse_wrk(completed.stdout).requests_per_sec


def contender_rate(name: str) -> Callable[[int], float]:
    """How to measure the contender `name` (see `load_tests.contenders`) on a port."""
    return lambda port: rate(CONTENDERS[name].command(port, 1), port)


def main() -> int:
    """Run the rounds; print each, then the medians and the ratios to uvicorn."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout of ours to compare")
    args = parser.parse_args()
    exit_on_sigterm()
    runs = {name: contender_rate(name) for name in (OURS, PEER, *OTHER_PEERS)}
    if args.baseline is not None:
        baseline = args.baseline.resolve()
        runs["baseline"] = lambda port: rate(
            [sys.executable, "-m", "socketify.cli", *CONTENDERS[OURS].command(port, 1)[1:]],
            port,
            cwd=baseline,
        )
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for number in range(1, args.rounds + 1):
        line = []
        for name, run in runs.items():
            figures[name].append(run(free_port()))
            line.append(f"{name} {figures[name][-1]:,.0f}")
        print(f"round {number}: " + ", ".join(line) + " req/s", flush=True)
    peer = statistics.median(figures[PEER])
    for name, values in figures.items():
        ratios = [value / base for value, base in zip(values, figures[PEER], strict=True)]
        print(
            f"{name}: median {statistics.median(values):,.0f} req/s, "
            f"{statistics.median(ratios):.2f}x {PEER} (same-round ratios; {PEER} median "
            f"{peer:,.0f})"
        )
    if "baseline" in figures:
        ratios = [
            ours / base for ours, base in zip(figures[OURS], figures["baseline"], strict=True)
        ]
        print(f"{OURS} / baseline: {statistics.median(ratios):.2f} (median of same-round ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
