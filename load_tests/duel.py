"""Ours against a peer on one shared core, both loaded at once: CPU per request on a noisy box.

    python load_tests/duel.py [--against socketify.py] [--rounds 5] [--duration 10]
    python load_tests/duel.py --tfb --path /json      # the TechEmpower apps (json, plaintext)

Theory of operation. On a shared virtual machine the speed of a core drifts by tens of percent
from one few-second window to the next, so servers measured one after the other (run_http.py,
tfb bench) can swap places between runs. A duel pins both servers to CPU 1 and loads them at
the same time, each with its own `wrk -t1 -c50` pinned to CPU 0: while both are busy the
scheduler shares the core between them fairly, so the ratio of their request rates is the
inverse ratio of their CPU per request, measured under the very same conditions. A round
counts only if the servers' core was busy all along (otherwise wrk, not the servers, set the
pace); the median of the rounds' ratios is printed. Ours runs from this tree (a compiled copy
made by `python -m tests.support.compiled_build DIR` measures the compiled build).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/duel.py`

from load_tests.contenders import CONTENDERS, OURS, peers_missing
from load_tests.harness import (
    REPO_ROOT,
    SERVER_CPU,
    WRK_CPU,
    RunningServer,
    free_port,
    pinned,
    serve,
)
from load_tests.tfb.contenders import SERVERS as TFB_SERVERS
from load_tests.wrk import WrkRun

BUSY_ENOUGH = 0.97  # the share of the round the servers' core must be busy for it to count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--against", default="socketify.py", help="the peer, as run_http.py (or tfb bench) names it"
    )
    parser.add_argument("--tfb", action="store_true", help="the TechEmpower apps, not /ping")
    parser.add_argument("--path", default=None, help="default /ping, or /json with --tfb")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=10, help="seconds per round")
    parser.add_argument("--connections", type=int, default=50, help="per wrk")
    args = parser.parse_args()
    path = args.path or ("/json" if args.tfb else "/ping")
    peers = TFB_SERVERS if args.tfb else CONTENDERS
    if args.against not in peers or args.against == OURS:
        print(f"--against: one of {', '.join(sorted(set(peers) - {OURS}))}")
        return 1
    problem = peers_missing(peers[args.against].modules)
    if problem:
        print(problem)
        return 1
    ratios = []
    with _server(OURS, args.tfb) as ours, _server(args.against, args.tfb) as peer:
        run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
        run.run(f"http://127.0.0.1:{ours.port}{path}")  # warm both up, one at a time
        run.run(f"http://127.0.0.1:{peer.port}{path}")
        for number in range(1, args.rounds + 1):
            ours_rate, peer_rate, busy = _round(run, path, ours, peer)
            counted = busy >= BUSY_ENOUGH
            if counted:
                ratios.append(ours_rate / peer_rate)
            print(
                f"round {number}: ours {ours_rate:,.0f} req/s, {args.against} {peer_rate:,.0f}, "
                f"ratio {ours_rate / peer_rate:.3f}, CPU {SERVER_CPU} busy {busy:.0%}"
                + ("" if counted else " (not counted)")
            )
    if not ratios:
        print("no round kept the servers' core busy: wrk set the pace")
        return 1
    print(f"ours ÷ {args.against} on {path}: {statistics.median(ratios):.3f} (median of rounds)")
    return 0


@contextlib.contextmanager
def _server(name: str, tfb: bool) -> Iterator[RunningServer]:
    port = free_port()
    if tfb:
        server = TFB_SERVERS[name]
        argv, cwd, ready = server.command(port, 1), server.cwd, "/plaintext"
    else:
        argv, cwd, ready = CONTENDERS[name].command(port, 1), None, "/ping"
    home = cwd if cwd is not None else REPO_ROOT
    with serve(name, pinned(argv, SERVER_CPU), port, ready_path=ready, cwd=home) as running:
        yield running


def _round(
    run: WrkRun, path: str, ours: RunningServer, peer: RunningServer
) -> tuple[float, float, float]:
    """Both wrk runs at once: (our req/s, the peer's, how busy the servers' core was)."""
    before = _cpu_times(SERVER_CPU)
    started = [
        subprocess.Popen(
            run.argv(f"http://127.0.0.1:{server.port}{path}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for server in (ours, peer)
    ]
    results = []
    for process in started:
        stdout, stderr = process.communicate()
        results.append(run.parse(process.returncode, stdout, stderr))
    after = _cpu_times(SERVER_CPU)
    busy = (after[0] - before[0]) / max(after[1] - before[1], 1)
    for result in results:
        if result.non_2xx or result.socket_errors.total:
            raise SystemExit(f"{result.non_2xx} non-2xx, socket errors {result.socket_errors}")
    return results[0].requests_per_sec, results[1].requests_per_sec, busy


def _cpu_times(cpu: int) -> tuple[int, int]:
    """(busy, total) jiffies of one CPU so far, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        fields = line.split()
        if fields[0] == f"cpu{cpu}":
            values = [int(value) for value in fields[1:]]
            idle = values[3] + values[4]  # idle and iowait
            return sum(values) - idle, sum(values)
    raise SystemExit(f"/proc/stat has no cpu{cpu}")


if __name__ == "__main__":
    raise SystemExit(main())
