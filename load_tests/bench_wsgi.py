"""The same Flask app and Django view under ours, Granian's WSGI interface and gunicorn
`-k gevent`, one worker each: req/s and our ratios against the bars.

Theory of operation: three scenarios, each one URL of an app in load_tests/apps that every
server imports unchanged: Flask's /ping (JSON) and /page (a Jinja page) in `wsgi_flask`, and
the Django JSON view of `wsgi_django`. For every scenario and round, each server in turn is
started pinned to CPU 1 (`taskset`), polled until it answers, checked to send the same body
as ours, warmed up, and measured with `wrk -t1 -c50` pinned to CPU 0. Rounds alternate the
servers so drifting load on a shared machine hits them all; the median round is reported.
Granian runs with its defaults for the WSGI interface (1 worker, its default blocking
threads), gunicorn with its gevent worker. The peers come from load_tests/.venv (see
contenders.py); ratios within one run are the result, not the absolute figures.

    python load_tests/bench_wsgi.py [--rounds 3] [--duration 8] [--only flask-ping ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import PEER_PACKAGES, VENV_BIN, peers_missing, setup_peers
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
from load_tests.wrk import WrkRun


@dataclass(frozen=True)
class Scenario:
    """One app and URL, with the ratios ours must reach against each peer."""

    name: str
    app: str  # module:attribute, the same for every server
    path: str
    bars: dict[str, float]  # peer name -> the ratio ours must reach


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("flask-ping", "load_tests.apps.wsgi_flask:app", "/ping",
                 {"granian": 1.1, "gunicorn-gevent": 3.0}),
        Scenario("flask-page", "load_tests.apps.wsgi_flask:app", "/page",
                 {"granian": 1.1, "gunicorn-gevent": 3.0}),
        Scenario("django-ping", "load_tests.apps.wsgi_django:application", "/ping",
                 {"granian": 1.1, "gunicorn-gevent": 2.0}),
    )
}  # fmt: skip


def _ours(app: str, port: int) -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    return [*cli, "run", app, "--workers", "1", "--bind", f"{HOST}:{port}",
            "--log-level", "warning"]  # fmt: skip


def _granian(app: str, port: int) -> list[str]:
    return [str(VENV_BIN / "granian"), "--interface", "wsgi", "--workers", "1", "--host", HOST,
            "--port", str(port), "--log-level", "warning", "--no-ws", app]  # fmt: skip


def _gunicorn(app: str, port: int) -> list[str]:
    return [str(VENV_BIN / "gunicorn"), app, "-k", "gevent", "--workers", "1",
            "--bind", f"{HOST}:{port}", "--log-level", "warning"]  # fmt: skip


PEER_MODULES = ("granian", "gunicorn", "gevent", "flask", "django")
SERVERS: dict[str, Callable[[str, int], list[str]]] = {
    "socketify": _ours,
    "granian": _granian,
    "gunicorn-gevent": _gunicorn,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios; exit 0 when every bar was met, 1 otherwise, 2 without peers."""
    args = _parse_args(argv)
    if missing := peers_missing(PEER_MODULES):
        if not args.setup:
            print(f"The peers are not installed ({missing}); run again with --setup to install "
                  f"{', '.join(PEER_PACKAGES)} into load_tests/.venv", file=sys.stderr)  # fmt: skip
            return 2
        setup_peers()
    run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    warmup = WrkRun(connections=args.connections, duration=2, cpu=WRK_CPU)
    met = True
    for scenario in (SCENARIOS[name] for name in args.only or SCENARIOS):
        print(f"\n{scenario.name}: GET {scenario.path} of {scenario.app}, "
              f"wrk -t1 -c{args.connections} -d{args.duration}s, {args.rounds} rounds")  # fmt: skip
        rates: dict[str, list[float]] = {name: [] for name in SERVERS}
        costs: dict[str, list[float]] = {name: [] for name in SERVERS}
        for round_number in range(args.rounds):
            expected = None
            for name, command in SERVERS.items():
                port = free_port()
                argv_ = pinned(command(scenario.app, port), SERVER_CPU)
                with serve(name, argv_, port) as server:
                    url = f"http://{HOST}:{port}{scenario.path}"
                    body = _body(url)
                    expected = expected or body
                    if body != expected:
                        print(f"  {name} sends another body: {body[:80]!r}", file=sys.stderr)
                    warmup.run(url)
                    cpu_before = _group_cpu(server.pid)
                    result = run.run(url)
                    cost = (_group_cpu(server.pid) - cpu_before) / result.requests * 1e6
                    rates[name].append(result.requests_per_sec)
                    costs[name].append(cost)
                    print(f"  round {round_number + 1} {name}: {result.requests_per_sec:,.0f} "
                          f"req/s, {cost:,.0f} us of server CPU per request",
                          flush=True)  # fmt: skip
        median_rate = {name: statistics.median(r) for name, r in rates.items()}
        median_cost = {name: statistics.median(c) for name, c in costs.items()}
        met = _report(scenario, median_rate, median_cost) and met
    return 0 if met else 1


def _body(url: str) -> bytes:
    # A JSON body is compared parsed-equal by its bytes without spaces (Django adds one).
    with urllib.request.urlopen(url, timeout=5) as response:
        return bytes(response.read()).replace(b" ", b"")


def _report(scenario: Scenario, rate: dict[str, float], cost: dict[str, float]) -> bool:
    """Print the medians and our ratios; True when the req/s ratios meet every bar.

    The CPU ratio (their server CPU per request over ours) is printed beside: on a shared
    machine, where the pinned core is not ours alone, it is the steadier estimate of what
    the req/s ratio would be on an idle one.
    """
    ours = rate["socketify"]
    print("  median: " + ", ".join(f"{name} {r:,.0f} req/s" for name, r in rate.items()))
    met = True
    for peer, bar in scenario.bars.items():
        ratio = ours / rate[peer] if rate[peer] else float("inf")
        cpu_ratio = cost[peer] / cost["socketify"] if cost["socketify"] else float("inf")
        verdict = "meets" if ratio >= bar else "MISSES"
        met = met and ratio >= bar
        print(f"  ours / {peer}: {ratio:.2f}x req/s ({verdict} the {bar:g}x bar), "
              f"{cpu_ratio:.2f}x by CPU per request")  # fmt: skip
    return met


def _group_cpu(pid: int) -> float:
    """CPU seconds of a server: its process and its children (a pre-fork master's workers)."""
    return cpu_seconds(pid) + sum(cpu_seconds(child) for child in child_pids(pid))


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8, help="wrk seconds per measurement")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--setup", action="store_true", help="install missing peers first")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
