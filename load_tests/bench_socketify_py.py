"""What socketify.py's API costs on /ping: our App against our native Server and socketify.py.

Theory of operation: three one-process servers run at the same time, all pinned to CPU 1:
`load_tests.apps.ping:server` (the native Server, `(req, res)` handler),
`load_tests.apps.ping_socketify_py:app` (the same answer from a socketify.py `(res, req)`
handler on our App) under `socketify run --workers 1`, and socketify.py itself
(`apps/peer_socketify_py_ping.py`, uWebSockets, from load_tests/.venv). Each round starts one
`wrk -t1 -c50` per server on CPU 0 at once, so the servers share one core for the same
seconds and the ratio of their request rates is the ratio of their costs per request. The
median ratios App/Server (what the compatibility layer costs) and App/socketify.py are the
figures.

    python load_tests/bench_socketify_py.py [--rounds 5] [--duration 8] [--connections 50]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import VENV_BIN
from load_tests.harness import HOST, LOAD_TESTS, SERVER_CPU, WRK_CPU, free_port, pinned, serve
from load_tests.wrk import WrkRun, run_together

OURS = {
    "Server": "load_tests.apps.ping:server",
    "App": "load_tests.apps.ping_socketify_py:app",
}
PEER = "socketify.py"


def _ours(app: str, port: int) -> list[str]:
    cli = [sys.executable, "-m", "socketify.cli"]
    return pinned([*cli, "run", app, "--workers", "1", "--bind", f"{HOST}:{port}"], SERVER_CPU)


def _peer(port: int) -> list[str]:
    script = LOAD_TESTS / "apps" / "peer_socketify_py_ping.py"
    return pinned([str(VENV_BIN / "python"), str(script), "--port", str(port)], SERVER_CPU)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the three side by side for --rounds rounds and print the median ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args(argv)
    run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    warm = WrkRun(connections=args.connections, duration=1, cpu=WRK_CPU)
    print(
        f"GET /ping; Server, App and {PEER} side by side on CPU {SERVER_CPU}, "
        f"one wrk -t1 -c{args.connections} -d{args.duration}s each on CPU {WRK_CPU}"
    )
    rates: dict[str, list[float]] = {"Server": [], "App": [], PEER: []}
    with contextlib.ExitStack() as stack:
        urls = {}
        for name, app in OURS.items():
            port = free_port()
            urls[name] = stack.enter_context(serve(name, _ours(app, port), port)).url
        port = free_port()
        # Started outside the repository: the PyPI package is also named `socketify`.
        urls[PEER] = stack.enter_context(serve(PEER, _peer(port), port, cwd=Path("/tmp"))).url
        run_together(warm, urls)
        for number in range(1, args.rounds + 1):
            results = run_together(run, urls)
            for name, result in results.items():
                if result.non_2xx or result.socket_errors.total:
                    print(f"  {name}: {result.non_2xx} non-2xx, {result.socket_errors}")
                rates[name].append(result.requests_per_sec)
            line = ", ".join(f"{name} {rates[name][-1]:8.0f} req/s" for name in rates)
            face = rates["App"][-1]
            print(
                f"round {number}: {line}; App/Server {face / rates['Server'][-1]:.3f}, "
                f"App/{PEER} {face / rates[PEER][-1]:.3f}",
                flush=True,
            )
    for name, found in rates.items():
        print(f"median {name}: {statistics.median(found):.0f} req/s")
    for other in ("Server", PEER):
        ratios = [a / b for a, b in zip(rates["App"], rates[other], strict=True)]
        print(f"median ratio App / {other}: {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
