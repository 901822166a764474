"""The same WSGI apps under ours, Granian's WSGI interface (twice) and gunicorn `-k gevent`,
one worker each: req/s, server CPU per request, errors, and our ratios against the bars.

Theory of operation: each scenario is one URL of an app in load_tests/apps that every server
imports unchanged: a raw WSGI callable's /ping (`wsgi_raw`), Flask's /ping (JSON) and /page
(a Jinja page) in `wsgi_flask`, the Django JSON view of `wsgi_django`, and Flask reading one
row of TechEmpower's `world` table through a psycopg2 pool (`wsgi_flask_pg`, in a schema of
its own, seeded first). For every scenario, connection count and round, each server in turn
is started pinned to CPU 1 (`taskset`), polled until it answers, checked to send the same
body as ours (the database's rows are random: its status only), warmed up, and measured with
`wrk -t1` pinned to CPU 0. Rounds alternate the servers so drifting load on a shared machine
hits them all; the median round is reported. Granian runs twice: with its defaults, and with
`--blocking-threads N` (the threads its WSGI calls run on; see --granian-threads). gunicorn
runs its gevent worker; on the database route with psycogreen installed in `post_fork`, as
its users run it (load_tests/apps/gunicorn_psycogreen.py). The peers come from
load_tests/.venv (see contenders.py); ratios within one run are the result, not the absolute
figures. Socket errors and non-2xx answers are counted and must be 0 on the database route.
There the CPU PostgreSQL spent per request is printed too (every process named `postgres`):
the server is unpinned and shares the two cores with ours and wrk, so it is part of the load.

    python load_tests/bench_wsgi.py [--rounds 3] [--duration 8] [--only flask-pg ...]
                                    [--granian-threads 8]
"""

from __future__ import annotations

import argparse
import contextlib
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
    database: bool = False  # reads PostgreSQL: seeded first, bodies differ, errors must be 0
    connections: tuple[int, ...] = (50,)  # wrk -c, each measured in turn


DB_BARS = {"granian": 1.5, "granian-threads": 1.5, "gunicorn-gevent": 2.0}
SCENARIOS = {
    s.name: s
    for s in (
        Scenario("raw-ping", "load_tests.apps.wsgi_raw:app", "/ping",
                 {"granian": 0.7, "granian-threads": 0.7}),
        Scenario("flask-ping", "load_tests.apps.wsgi_flask:app", "/ping",
                 {"granian": 1.1, "granian-threads": 1.1, "gunicorn-gevent": 3.0}),
        Scenario("flask-page", "load_tests.apps.wsgi_flask:app", "/page",
                 {"granian": 1.1, "granian-threads": 1.1, "gunicorn-gevent": 3.0}),
        Scenario("django-ping", "load_tests.apps.wsgi_django:application", "/ping",
                 {"granian": 1.1, "granian-threads": 1.1, "gunicorn-gevent": 2.0}),
        Scenario("flask-pg", "load_tests.apps.wsgi_flask_pg:app", "/db", DB_BARS,
                 database=True, connections=(50, 256)),
    )
}  # fmt: skip
BENCH_SCHEMA = "bench_wsgi"  # the database scenario's own schema: other runs keep theirs
# Granian's --blocking-threads for its second run: of 2, 4, 8, 16 and 32 (c=50, a loaded
# machine), 16 was the best on the database route and near the best on Flask's /ping. Its
# default for WSGI is half its backpressure: 512 threads with one worker.
GRANIAN_THREADS = 16
PSYCOGREEN_CONFIG = Path(__file__).resolve().parent / "apps" / "gunicorn_psycogreen.py"


def _ours(scenario: Scenario, port: int, threads: int) -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    return [*cli, "run", scenario.app, "--workers", "1", "--bind", f"{HOST}:{port}",
            "--log-level", "warning"]  # fmt: skip


def _granian(scenario: Scenario, port: int, threads: int) -> list[str]:
    return [str(VENV_BIN / "granian"), "--interface", "wsgi", "--workers", "1", "--host", HOST,
            "--port", str(port), "--log-level", "warning", "--no-ws", scenario.app]  # fmt: skip


def _granian_threads(scenario: Scenario, port: int, threads: int) -> list[str]:
    return [*_granian(scenario, port, threads)[:-1], "--blocking-threads", str(threads),
            scenario.app]  # fmt: skip


def _gunicorn(scenario: Scenario, port: int, threads: int) -> list[str]:
    config = ["-c", str(PSYCOGREEN_CONFIG)] if scenario.database else []
    return [str(VENV_BIN / "gunicorn"), scenario.app, "-k", "gevent", "--workers", "1",
            "--bind", f"{HOST}:{port}", "--log-level", "warning", *config]  # fmt: skip


PEER_MODULES = ("granian", "gunicorn", "gevent", "flask", "django", "psycogreen")
SERVERS: dict[str, Callable[[Scenario, int, int], list[str]]] = {
    "socketify": _ours,
    "granian": _granian,
    "granian-threads": _granian_threads,
    "gunicorn-gevent": _gunicorn,
}


@dataclass
class Figures:
    """What the rounds measured for one server at one connection count."""

    rates: list[float]
    costs: list[float]  # microseconds of server CPU per request
    database_costs: list[float]  # microseconds of PostgreSQL's CPU per request
    errors: list[int]  # socket errors and non-2xx answers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios; exit 0 when every bar was met, 1 otherwise, 2 without peers."""
    args = _parse_args(argv)
    if missing := peers_missing(PEER_MODULES):
        if not args.setup:
            print(f"The peers are not installed ({missing}); run again with --setup to install "
                  f"{', '.join(PEER_PACKAGES)} into load_tests/.venv", file=sys.stderr)  # fmt: skip
            return 2
        setup_peers()
    scenarios = [SCENARIOS[name] for name in args.only or SCENARIOS]
    if any(scenario.database for scenario in scenarios):
        _seed_database()
    met = True
    for scenario in scenarios:
        for connections in scenario.connections:
            met = _measure(scenario, connections, args) and met
    return 0 if met else 1


def _seed_database() -> None:
    """Point $TFB_DATABASE_URL (inherited by the servers) at our schema and seed it."""
    import os

    from load_tests.tfb import schema
    from load_tests.tfb.spec import URL_ENV, database_url

    os.environ[URL_ENV] = f"{database_url()[0]}?schema={BENCH_SCHEMA}"
    schema.seed()


def _measure(scenario: Scenario, connections: int, args: argparse.Namespace) -> bool:
    """Every server on one scenario at one connection count; True when the bars are met."""
    run = WrkRun(connections=connections, duration=args.duration, cpu=WRK_CPU)
    warmup = WrkRun(connections=connections, duration=2, cpu=WRK_CPU)
    print(f"\n{scenario.name}: GET {scenario.path} of {scenario.app}, "
          f"wrk -t1 -c{connections} -d{args.duration}s, {args.rounds} rounds, "
          f"granian-threads = --blocking-threads {args.granian_threads}")  # fmt: skip
    figures = {name: Figures([], [], [], []) for name in SERVERS}
    for round_number in range(args.rounds):
        expected = None
        for name, command in SERVERS.items():
            port = free_port()
            argv = pinned(command(scenario, port, args.granian_threads), SERVER_CPU)
            with serve(name, argv, port, ready_path=scenario.path) as server:
                url = f"http://{HOST}:{port}{scenario.path}"
                status, body = _fetch(url)
                if scenario.database:
                    body = str(status).encode()  # random rows: the status must match
                expected = expected or body
                if body != expected:
                    print(f"  {name} sends another body: {body[:80]!r}", file=sys.stderr)
                warmup.run(url)
                cpu_before, database_before = _group_cpu(server.pid), _database_cpu()
                result = run.run(url)
                cost = (_group_cpu(server.pid) - cpu_before) / max(result.requests, 1) * 1e6
                database_cost = (_database_cpu() - database_before) / max(result.requests, 1) * 1e6
                errors = result.socket_errors.total + result.non_2xx
                figures[name].rates.append(result.requests_per_sec)
                figures[name].costs.append(cost)
                figures[name].database_costs.append(database_cost)
                figures[name].errors.append(errors)
                database = f", {database_cost:,.0f} us of PostgreSQL's" if scenario.database else ""
                print(f"  round {round_number + 1} {name}: {result.requests_per_sec:,.0f} "
                      f"req/s, {cost:,.0f} us of server CPU per request{database}, "
                      f"{errors} errors", flush=True)  # fmt: skip
    return _report(scenario, figures)


def _fetch(url: str) -> tuple[int, bytes]:
    # A JSON body is compared parsed-equal by its bytes without spaces (Django adds one).
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, bytes(response.read()).replace(b" ", b"")


def _report(scenario: Scenario, figures: dict[str, Figures]) -> bool:
    """Print the medians and our ratios; True when the req/s ratios meet every bar (and, on
    the database route, no server of ours made an error).

    The CPU ratio (their server CPU per request over ours) is printed beside: on a shared
    machine, where the pinned core is not ours alone, it is the steadier estimate of what
    the req/s ratio would be on an idle one.
    """
    rate = {name: statistics.median(f.rates) for name, f in figures.items()}
    cost = {name: statistics.median(f.costs) for name, f in figures.items()}
    errors = {name: sum(f.errors) for name, f in figures.items()}
    print("  median: " + ", ".join(f"{name} {r:,.0f} req/s" for name, r in rate.items()))
    print("  errors: " + ", ".join(f"{name} {n}" for name, n in errors.items()))
    if scenario.database:
        database = {name: statistics.median(f.database_costs) for name, f in figures.items()}
        print("  PostgreSQL's CPU per request: "
              + ", ".join(f"{name} {us:,.0f} us" for name, us in database.items()))  # fmt: skip
    met = not (scenario.database and errors["socketify"])
    ours = rate["socketify"]
    for peer, bar in scenario.bars.items():
        ratio = ours / rate[peer] if rate[peer] else float("inf")
        cpu_ratio = cost[peer] / cost["socketify"] if cost["socketify"] else float("inf")
        verdict = "meets" if ratio >= bar else "MISSES"
        met = met and ratio >= bar
        print(f"  ours / {peer}: {ratio:.2f}x req/s ({verdict} the {bar:g}x bar), "
              f"{cpu_ratio:.2f}x by CPU per request")  # fmt: skip
    return met


def _database_cpu() -> float:
    """CPU seconds of every PostgreSQL process (other clients' queries count too)."""
    total = 0.0
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError, ValueError):
            if comm.read_text().strip() == "postgres":
                total += cpu_seconds(int(comm.parent.name))
    return total


def _group_cpu(pid: int) -> float:
    """CPU seconds of a server: its process and its children (a pre-fork master's workers)."""
    return cpu_seconds(pid) + sum(cpu_seconds(child) for child in child_pids(pid))


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8, help="wrk seconds per measurement")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--granian-threads", type=int, default=GRANIAN_THREADS,
                        help="Granian's --blocking-threads for its second run")  # fmt: skip
    parser.add_argument("--setup", action="store_true", help="install missing peers first")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
