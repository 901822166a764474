"""The database bar: GET /users/:id (one primary-key select in a db_session) vs /ping.

Besides the bar's route (`User[1]`, an entity object), each round also measures two reference
lines, reported separately and clearly labelled; the verdict is the bar route's:
/users/1/row, the same read through `socketify.db.get_row` (a plain dict, no entity object),
and /users/1/driver, the driver ceiling: the same SELECT through `sqlite3` or psycopg2 alone,
no ORM and nothing of socketify.db on the request path (see load_tests/apps/db_users.py). The
ceiling says what ratio the database itself leaves room for on this machine.

    python load_tests/run_db.py [--rounds 3] [--duration 5] [--connections 50] [--only sqlite]
                                [--fast-path on|off|both]

For SQLite (a WAL file in a temporary directory) and PostgreSQL (a schema of its own in
database `test` at 127.0.0.1:5432, user postgres, dropped afterwards), starts `socketify run
load_tests.apps.db_users:server --workers 1` pinned to CPU 1 and runs `wrk -t1` pinned to CPU 0
against `/ping`, `/users/1`, `/users/1/row` and `/users/1/driver`, alternating for several
rounds so a noisy neighbour hits all alike. It prints each round's req/s and the ratio to /ping
of the same round, then the median.
`--fast-path both` starts a second server with socketify.db's fast path off
(SOCKETIFY_DB_FAST_PATH=0, plain Pony; its PostgreSQL connections' application_name ends in
`_plain`, so the sampler counts the first server's only) beside the first, measures /ping,
/users/1 and /users/1/row on both in every round, then prints what the fast path buys: plain
over fast in req/s, per round and median, and the worker CPU per request of both. The bars
are the first server's (the default: fast path on).
During the PostgreSQL run a sampler counts the server's backends in `pg_stat_activity` (by the
run's `application_name`) every 20 ms; the driver ceiling's own connections carry that
name plus `_driver` and are not counted (they are not the pool's). Results go to
load_tests/results/db-users-*.json.
Bars: SQLite >= 0.5x /ping, PostgreSQL >= 0.3x /ping, PostgreSQL connections never
above workers x pool_size.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/run_db.py`

from load_tests.harness import (
    LOAD_TESTS,
    SERVER_CPU,
    WRK_CPU,
    child_pids,
    cpu_seconds,
    exit_on_sigterm,
    free_port,
    pinned,
    serve,
)
from load_tests.wrk import WrkResult, WrkRun
from socketify.db import fastpath

APP = "load_tests.apps.db_users:server"
PG_ADMIN = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "test"}
OBJECT_ROUTE = "/users/1"  # `User[1]`: the bar's route, Pony's entity object
ROW_ROUTE = "/users/1/row"  # `socketify.db.get_row(User, 1)`: the read-only fast path
DRIVER_ROUTE = "/users/1/driver"  # the driver alone, no ORM: what the database leaves room for
REFERENCES = (ROW_ROUTE, DRIVER_ROUTE)  # measured and reported beside the bar's route
ROUTES = ("/ping", OBJECT_ROUTE, *REFERENCES)
LABELS = {
    OBJECT_ROUTE: "object path User[1]",
    ROW_ROUTE: "row fast path get_row",
    DRIVER_ROUTE: "driver ceiling: the driver alone, no ORM",
}
# The application_name suffix of the driver ceiling's PostgreSQL connections (db_users.py).
DRIVER_APPLICATION_SUFFIX = "_driver"
BARS = {"sqlite": 0.5, "postgres": 0.3}
# SOCKETIFY_DB_FAST_PATH per server; "fast" is the default and the bars' server.
FAST_PATH_MODES = {"fast": "1", "plain": "0"}
PLAIN_ROUTES = ("/ping", OBJECT_ROUTE, ROW_ROUTE)  # the driver ceiling does not use socketify.db
PLAIN_APPLICATION_SUFFIX = "_plain"
WORKERS = 1
SAMPLE_EVERY_S = 0.02


@dataclass(frozen=True)
class RouteRun:
    """One wrk run, with the CPU time the worker (and PostgreSQL) spent per request."""

    wrk: WrkResult
    worker_cpu_us: float  # per request, from /proc/<worker>/stat: steadier than req/s
    postgres_cpu_us: float | None  # per request, summed over the server's backends


@dataclass
class EngineRun:
    """What one engine's server did: each round's runs per route, and PostgreSQL's backends."""

    engine: str
    mode: str = "fast"  # the server's fast path: "fast" (on) or "plain" (off)
    # Appended to the PostgreSQL application_name of a second server's connections.
    application_suffix: str = ""
    rounds: list[dict[str, RouteRun]] = field(default_factory=list)
    peak_connections: int | None = None

    @property
    def label(self) -> str:
        """The engine, and the fast path when it is off."""
        return self.engine if self.mode == "fast" else f"{self.engine} (fast path off)"

    @property
    def routes(self) -> tuple[str, ...]:
        """The routes measured on this server."""
        return ROUTES if self.mode == "fast" else PLAIN_ROUTES

    @property
    def references(self) -> tuple[str, ...]:
        """The reference routes measured on this server."""
        return tuple(route for route in REFERENCES if route in self.routes)

    def ratios(self, route: str = OBJECT_ROUTE) -> list[float]:
        """`route` over /ping in req/s, per round."""
        return [rate(r[route]) / rate(r["/ping"]) for r in self.rounds]

    def cpu_ratios(self, route: str = OBJECT_ROUTE) -> list[float]:
        """Worker CPU per request of /ping over `route`, per round (the ratio CPU allows)."""
        return [r["/ping"].worker_cpu_us / r[route].worker_cpu_us for r in self.rounds]


def rate(run: RouteRun) -> float:
    """Requests per second."""
    return run.wrk.requests_per_sec


def backend_pids(application_name: str) -> list[int]:
    """The PostgreSQL backends serving connections with this application_name."""
    import psycopg2

    con = psycopg2.connect(**PG_ADMIN)
    try:
        with con.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            )
            return [row[0] for row in cursor.fetchall()]
    finally:
        con.close()


def timed(run: WrkRun, url: str, worker: int, application_name: str | None) -> RouteRun:
    """Run wrk against url, noting the CPU the worker and the backends (the connections named
    `application_name`) used meanwhile."""
    backends = backend_pids(application_name) if application_name else []
    before = [cpu_seconds(pid) for pid in [worker, *backends]]
    result = checked(run.run(url))
    after = [cpu_seconds(pid) for pid in [worker, *backends]]
    spent = [1e6 * (b - a) / result.requests for a, b in zip(before, after, strict=True)]
    return RouteRun(result, spent[0], sum(spent[1:]) if application_name else None)


class ConnectionSampler(threading.Thread):
    """Counts PostgreSQL backends with one application_name until stopped; keeps the peak."""

    def __init__(self, application_name: str) -> None:
        super().__init__(daemon=True)
        self.application_name = application_name
        self.peak = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        import psycopg2

        con = psycopg2.connect(**PG_ADMIN)
        con.autocommit = True
        try:
            with con.cursor() as cursor:
                while not self.stopped.wait(SAMPLE_EVERY_S):
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                        (self.application_name,),
                    )
                    self.peak = max(self.peak, cursor.fetchone()[0])
        finally:
            con.close()


@contextlib.contextmanager
def postgres_schema() -> Iterator[str]:
    """A fresh schema name (also the application_name); the schema is dropped afterwards."""
    import psycopg2

    name = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        con = psycopg2.connect(**PG_ADMIN)
        con.autocommit = True
        with con.cursor() as cursor:
            cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        con.close()


def measure(
    engine: str, url: str, args: argparse.Namespace, sampler: ConnectionSampler | None
) -> list[EngineRun]:
    """Start the app on `url` once per fast-path mode, warm up, run the rounds (each mode's
    routes in turn, every round); stop the servers. One EngineRun per mode."""
    schema = sampler.application_name if sampler is not None else None
    results = [
        EngineRun(engine, mode, "" if index == 0 else PLAIN_APPLICATION_SUFFIX)
        for index, mode in enumerate(args.modes)
    ]
    with contextlib.ExitStack() as servers:
        started = []
        for result in results:
            port = free_port()
            argv = pinned(
                [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", str(WORKERS),
                 "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
                SERVER_CPU,
            )  # fmt: skip
            # Inherited by the server (serve() copies os.environ).
            os.environ["DB_URL"] = named_url(url, schema, result.application_suffix)
            os.environ["POOL_SIZE"] = str(args.pool_size)
            os.environ[fastpath.ENV] = FAST_PATH_MODES[result.mode]
            server = servers.enter_context(serve(f"socketify+{result.label}", argv, port))
            (worker,) = child_pids(server.pid)
            started.append((result, worker, f"http://127.0.0.1:{port}"))
        if sampler is not None:
            sampler.start()
        for result, _, base in started:
            for route in result.routes:
                if args.warmup:
                    checked(WrkRun(args.connections, args.warmup, cpu=WRK_CPU).run(base + route))
        run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
        for number in range(1, args.rounds + 1):
            for result, worker, base in started:
                runs = {
                    route: timed(
                        run,
                        base + route,
                        worker,
                        application_name(schema, route, result.application_suffix),
                    )
                    for route in result.routes
                }
                result.rounds.append(runs)
                report_round(result, number, runs)
    if sampler is not None:
        sampler.stopped.set()
        sampler.join()
        results[0].peak_connections = sampler.peak
    return results


def report_round(result: EngineRun, number: int, runs: dict[str, RouteRun]) -> None:
    """Print one round of one server: /ping, then each route with its ratio to /ping."""
    ping = runs["/ping"]
    print(
        f"  {result.label:<9} round {number}: /ping {rate(ping):>7,.0f} req/s, "
        f"worker CPU {ping.worker_cpu_us:.0f} µs/request",
        flush=True,
    )
    for route in (OBJECT_ROUTE, *result.references):
        users = runs[route]
        pg = f", postgres {users.postgres_cpu_us:.0f}" if users.postgres_cpu_us else ""
        print(
            f"    {route:<15} {rate(users):>7,.0f} req/s  ratio "
            f"{rate(users) / rate(ping):.2f}x  |  worker CPU {users.worker_cpu_us:.0f}"
            f"{pg} µs/request  ({LABELS[route]})",
            flush=True,
        )


def named_url(url: str, schema: str | None, suffix: str) -> str:
    """`url`, its PostgreSQL connections' application_name followed by `suffix`."""
    if schema is None or not suffix:
        return url
    return url.replace(f"application_name={schema}", f"application_name={schema}{suffix}")


def application_name(schema: str | None, route: str, suffix: str = "") -> str | None:
    """The application_name of the PostgreSQL connections serving `route` on the server whose
    pool's names end in `suffix`; None for SQLite."""
    if schema is None:
        return None
    return schema + (DRIVER_APPLICATION_SUFFIX if route == DRIVER_ROUTE else suffix)


def checked(result: WrkResult) -> WrkResult:
    """The result, unless wrk saw errors: a 404/503 or a reset makes the figure meaningless."""
    if result.non_2xx or result.socket_errors.total:
        raise SystemExit(f"{result.non_2xx} non-2xx answers, socket errors {result.socket_errors}")
    return result


def main() -> int:
    """Run SQLite then PostgreSQL, print the medians and verdicts, save JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="wrk seconds per route per round")
    parser.add_argument("--warmup", type=int, default=1, help="discarded wrk seconds per route")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--pool-size", type=int, default=8)
    parser.add_argument("--only", action="append", choices=list(BARS), metavar="ENGINE")
    parser.add_argument(
        "--fast-path",
        choices=("on", "off", "both"),
        default="on",
        help="socketify.db's fast path on the server (both: a second server with it off)",
    )
    args = parser.parse_args()
    args.modes = {"on": ["fast"], "off": ["plain"], "both": ["fast", "plain"]}[args.fast_path]
    exit_on_sigterm()
    engines = args.only or list(BARS)
    print(
        f"GET /ping vs GET /users/1 (references: {', '.join(REFERENCES)}), "
        f"{WORKERS} worker pinned to CPU {SERVER_CPU}, "
        f"wrk -t1 -c{args.connections} -d{args.duration}s pinned to CPU {WRK_CPU}, "
        f"pool_size {args.pool_size}, fast path {args.fast_path}"
    )
    runs = []
    for engine in engines:
        if engine == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                runs.extend(measure(engine, f"sqlite:///{tmp}/users.db", args, None))
        else:
            with postgres_schema() as schema:
                url = (
                    f"postgres://postgres@127.0.0.1:5432/test?schema={schema}"
                    f"&application_name={schema}"
                )
                runs.extend(measure(engine, url, args, ConnectionSampler(schema)))
    verdicts = []
    for run in runs:
        median = statistics.median(run.ratios())
        verdict = "PASS" if median >= BARS[run.engine] else "MISS"
        if run.mode == args.modes[0]:
            verdicts.append(verdict)  # the bars are the first server's (the default's)
        else:
            verdict += " (reference, not the bar's server)"
        print(
            f"median {run.label}: {OBJECT_ROUTE} ({LABELS[OBJECT_ROUTE]}) {median:.2f}x /ping "
            f"(bar {BARS[run.engine]}x) {verdict}; by worker CPU per request "
            f"{statistics.median(run.cpu_ratios()):.2f}x"
        )
        for route in run.references:
            reference = statistics.median(run.ratios(route))
            would = "would pass" if reference >= BARS[run.engine] else "would miss"
            print(
                f"  {route} ({LABELS[route]}; not the bar's route): {reference:.2f}x /ping "
                f"({would}); by worker CPU per request "
                f"{statistics.median(run.cpu_ratios(route)):.2f}x"
            )
        if run.peak_connections is not None:
            limit = WORKERS * args.pool_size
            ok = "PASS" if run.peak_connections <= limit else "MISS"
            verdicts.append(ok)
            print(
                f"postgres backends of the server, peak: {run.peak_connections} "
                f"(limit workers x pool_size = {limit}) {ok}"
            )
    for fast, plain in fast_path_pairs(runs):
        for route in (OBJECT_ROUTE, ROW_ROUTE):
            print(fast_path_gain(fast, plain, route))
    path = save(runs, args)
    print(f"\nSaved {path}\nResults are noisy: compare ratios within one run, repeat the run.")
    return 0 if all(v == "PASS" for v in verdicts) else 1


def fast_path_pairs(runs: list[EngineRun]) -> list[tuple[EngineRun, EngineRun]]:
    """(fast, plain) runs of the same engine, measured in the same rounds."""
    fast = {run.engine: run for run in runs if run.mode == "fast"}
    return [(fast[run.engine], run) for run in runs if run.mode == "plain" and run.engine in fast]


def fast_path_gain(fast: EngineRun, plain: EngineRun, route: str) -> str:
    """One line: `route` with the fast path off over on, in req/s per round (the same round)
    and worker CPU per request, and each server's ratio to its own /ping."""
    rates = [
        rate(p[route]) / rate(f[route]) for f, p in zip(fast.rounds, plain.rounds, strict=True)
    ]
    cpu_fast = statistics.median(r[route].worker_cpu_us for r in fast.rounds)
    cpu_plain = statistics.median(r[route].worker_cpu_us for r in plain.rounds)
    return (
        f"fast path, {fast.engine} {route}: off/on req/s "
        f"{', '.join(f'{r:.2f}' for r in rates)} (median {statistics.median(rates):.2f}x); "
        f"worker CPU per request {cpu_fast:.0f} µs on, {cpu_plain:.0f} µs off "
        f"(off spends {cpu_plain / cpu_fast:.2f}x); vs /ping "
        f"{statistics.median(fast.ratios(route)):.2f}x on, "
        f"{statistics.median(plain.ratios(route)):.2f}x off"
    )


def save(runs: list[EngineRun], args: argparse.Namespace) -> Path:
    """Write the run as JSON under load_tests/results/."""
    record = {
        "scenario": "db-users",
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "workers": WORKERS,
        "pinning": f"server cpu {SERVER_CPU}, wrk cpu {WRK_CPU}",
        "connections": args.connections,
        "duration_s": args.duration,
        "pool_size": args.pool_size,
        "fast_path": args.fast_path,
        "bars": BARS,
        "engines": {
            run.label: {
                "fast_path": run.mode == "fast",
                "rounds": [
                    {route: {
                        **vars(r.wrk), "socket_errors": vars(r.wrk.socket_errors),
                        "worker_cpu_us_per_request": r.worker_cpu_us,
                        "postgres_cpu_us_per_request": r.postgres_cpu_us,
                    } for route, r in runs.items()}
                    for runs in run.rounds
                ],
                "ratios": run.ratios(),
                "median_ratio": statistics.median(run.ratios()),
                "cpu_ratios": run.cpu_ratios(),
                **reference_record(run, ROW_ROUTE, "row"),
                **(reference_record(run, DRIVER_ROUTE, "driver") if run.mode == "fast" else {}),
                "peak_pg_connections": run.peak_connections,
            }
            for run in runs
        },
    }  # fmt: skip
    results = LOAD_TESTS / "results"
    results.mkdir(exist_ok=True)
    stamp = f"{datetime.datetime.now():%Y%m%d-%H%M%S}"
    path = results / f"db-users-c{args.connections}-w{WORKERS}-{stamp}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def reference_record(run: EngineRun, route: str, prefix: str) -> dict[str, object]:
    """A reference line's figures for the JSON record, keys starting with `prefix`."""
    return {
        f"{prefix}_route": route,
        f"{prefix}_label": LABELS[route],
        f"{prefix}_ratios": run.ratios(route),
        f"{prefix}_median_ratio": statistics.median(run.ratios(route)),
        f"{prefix}_cpu_ratios": run.cpu_ratios(route),
    }


if __name__ == "__main__":
    sys.exit(main())
