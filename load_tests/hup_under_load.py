"""SIGHUP under load: ours with 2 workers keeps answering while its master reloads twice.

Starts `socketify run load_tests.apps.ping:server --workers 2`, runs wrk for 10 s, sends SIGHUP
to the master at ~3 s and ~6 s, and reports wrk's non-2xx responses and socket errors (bar: 0
and 0) and the worker pids before and after, which must all be new (else no reload happened).
Nothing is pinned: wrk competes with the workers for the 2 cores. Exit status 0 when the bar
holds, 1 when it does not, 2 when the server did not start. `hup_under_wrk` is the experiment
itself; `load_tests/faults.py hup-reload` runs it too.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import CONTENDERS, OURS
from load_tests.harness import ServerFailedToStart, child_pids, exit_on_sigterm, free_port, serve
from load_tests.wrk import WrkFailed, WrkResult, WrkRun


@dataclass(frozen=True)
class HupRun:
    """What wrk saw while the master got its SIGHUPs, and the workers before and after."""

    result: WrkResult
    first_workers: list[int]
    last_workers: list[int]

    @property
    def reloaded(self) -> bool:
        """Whether every worker at the end is a new one (else no reload happened)."""
        return bool(self.last_workers) and not set(self.first_workers) & set(self.last_workers)

    @property
    def held(self) -> bool:
        """The bar: 0 non-2xx responses, 0 socket errors, and every worker replaced."""
        return self.result.non_2xx == 0 and self.result.socket_errors.total == 0 and self.reloaded


def hup_under_wrk(
    *,
    workers: int,
    connections: int,
    duration: int,
    hup_at: Sequence[float],
    say: Callable[[str], object] = print,
) -> HupRun:
    """Run wrk against ours and SIGHUP the master `hup_at` seconds into the run.

    Raises ServerFailedToStart or WrkFailed when there is nothing to judge.
    """
    port = free_port()
    run = WrkRun(connections=connections, duration=duration)
    with serve(OURS, CONTENDERS[OURS].command(port, workers), port) as server:
        first_workers = child_pids(server.pid)
        say(f"master {server.pid}, workers {first_workers}; {' '.join(run.argv(server.url))}")
        started = time.monotonic()
        wrk = subprocess.Popen(
            run.argv(server.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for at in hup_at:
            time.sleep(max(0.0, started + at - time.monotonic()))
            workers_now = child_pids(server.pid)
            os.kill(server.pid, signal.SIGHUP)
            elapsed = time.monotonic() - started
            say(f"  t={elapsed:4.1f} s: SIGHUP to master {server.pid} (workers {workers_now})")
        stdout, stderr = wrk.communicate()
        last_workers = child_pids(server.pid)
    return HupRun(run.parse(wrk.returncode, stdout, stderr), first_workers, last_workers)


def main(argv: Sequence[str] | None = None) -> int:
    """Run wrk against ours, SIGHUP the master during the run, and judge wrk's errors."""
    args = _parse_args(argv)
    exit_on_sigterm()
    try:
        hup = hup_under_wrk(
            workers=args.workers,
            connections=args.connections,
            duration=args.duration,
            hup_at=args.hup_at,
        )
    except (ServerFailedToStart, WrkFailed) as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 2
    result, errors = hup.result, hup.result.socket_errors
    state = "all new" if hup.reloaded else "NOT all new"
    print(f"  after wrk: workers {hup.last_workers} ({state})")
    print(
        f"\n{result.requests:,} requests, {result.requests_per_sec:,.0f} req/s, "
        f"p99 {result.p99_ms:.2f} ms\n"
        f"non-2xx/3xx: {result.non_2xx}   socket errors: {errors.total} (connect "
        f"{errors.connect}, read {errors.read}, write {errors.write}, timeout {errors.timeout})"
    )
    print(f"bar (0 non-2xx, 0 socket errors, workers replaced): {'PASS' if hup.held else 'FAIL'}")
    return 0 if hup.held else 1


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="wrk seconds (default 10)")
    parser.add_argument("--connections", type=int, default=50, help="wrk -c (default 50)")
    parser.add_argument("--workers", type=int, default=2, help="server workers (default 2)")
    parser.add_argument(
        "--hup-at",
        type=lambda text: [float(part) for part in text.split(",")],
        default=[3.0, 6.0],
        metavar="SECONDS",
        help="when to send SIGHUP, seconds into the wrk run (default 3,6)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
