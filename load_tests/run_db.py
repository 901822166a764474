"""The database bar: GET /users/:id (one primary-key select in a db_session) vs /ping.

Besides the bar's route (`User[1]`, an entity object), each round also measures two reference
lines, reported separately and clearly labelled; the verdict is the bar route's:
/users/1/row, the same read through `socketify.db.get_row` (a plain dict, no entity object),
and /users/1/driver, the driver ceiling: the same SELECT through `sqlite3` or psycopg2 alone,
no ORM and nothing of socketify.db on the request path (see load_tests/apps/db_users.py). The
ceiling says what ratio the database itself leaves room for on this machine.

    python load_tests/run_db.py [--rounds 3] [--duration 5] [--connections 50] [--only sqlite]

For SQLite (a WAL file in a temporary directory) and PostgreSQL (a schema of its own in
database `test` at 127.0.0.1:5432, user postgres, dropped afterwards), starts `socketify run
load_tests.apps.db_users:server --workers 1` pinned to CPU 1 and runs `wrk -t1` pinned to CPU 0
against `/ping`, `/users/1`, `/users/1/row` and `/users/1/driver`, alternating for several
rounds so a noisy neighbour hits all alike. It prints each round's req/s and the ratio to /ping
of the same round, then the median.
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
    rounds: list[dict[str, RouteRun]] = field(default_factory=list)
    peak_connections: int | None = None

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
) -> EngineRun:
    """Start the app on `url`, warm up, run the rounds; stop it."""
    port = free_port()
    argv = pinned(
        [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", str(WORKERS),
         "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        SERVER_CPU,
    )  # fmt: skip
    os.environ["DB_URL"] = url  # inherited by the server (serve() copies os.environ)
    os.environ["POOL_SIZE"] = str(args.pool_size)
    run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    result = EngineRun(engine)
    schema = sampler.application_name if sampler is not None else None
    with serve(f"socketify+{engine}", argv, port) as server:
        (worker,) = child_pids(server.pid)
        base = f"http://127.0.0.1:{port}"
        if sampler is not None:
            sampler.start()
        for route in ROUTES:
            if args.warmup:
                checked(WrkRun(args.connections, args.warmup, cpu=WRK_CPU).run(base + route))
        for number in range(1, args.rounds + 1):
            runs = {
                route: timed(run, base + route, worker, application_name(schema, route))
                for route in ROUTES
            }
            result.rounds.append(runs)
            ping = runs["/ping"]
            print(
                f"  {engine:<9} round {number}: /ping {rate(ping):>7,.0f} req/s, "
                f"worker CPU {ping.worker_cpu_us:.0f} µs/request",
                flush=True,
            )
            for route in (OBJECT_ROUTE, *REFERENCES):
                users = runs[route]
                pg = f", postgres {users.postgres_cpu_us:.0f}" if users.postgres_cpu_us else ""
                print(
                    f"    {route:<15} {rate(users):>7,.0f} req/s  ratio "
                    f"{rate(users) / rate(ping):.2f}x  |  worker CPU {users.worker_cpu_us:.0f}"
                    f"{pg} µs/request  ({LABELS[route]})",
                    flush=True,
                )
    if sampler is not None:
        sampler.stopped.set()
        sampler.join()
        result.peak_connections = sampler.peak
    return result


def application_name(schema: str | None, route: str) -> str | None:
    """The application_name of the PostgreSQL connections serving `route`; None for SQLite."""
    if schema is None:
        return None
    return schema + DRIVER_APPLICATION_SUFFIX if route == DRIVER_ROUTE else schema


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
    args = parser.parse_args()
    exit_on_sigterm()
    engines = args.only or list(BARS)
    print(
        f"GET /ping vs GET /users/1 (references: {', '.join(REFERENCES)}), "
        f"{WORKERS} worker pinned to CPU {SERVER_CPU}, "
        f"wrk -t1 -c{args.connections} -d{args.duration}s pinned to CPU {WRK_CPU}, "
        f"pool_size {args.pool_size}"
    )
    runs = []
    for engine in engines:
        if engine == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(measure(engine, f"sqlite:///{tmp}/users.db", args, None))
        else:
            with postgres_schema() as schema:
                url = (
                    f"postgres://postgres@127.0.0.1:5432/test?schema={schema}"
                    f"&application_name={schema}"
                )
                runs.append(measure(engine, url, args, ConnectionSampler(schema)))
    verdicts = []
    for run in runs:
        median = statistics.median(run.ratios())
        verdict = "PASS" if median >= BARS[run.engine] else "MISS"
        verdicts.append(verdict)
        print(
            f"median {run.engine}: {OBJECT_ROUTE} ({LABELS[OBJECT_ROUTE]}) {median:.2f}x /ping "
            f"(bar {BARS[run.engine]}x) {verdict}; by worker CPU per request "
            f"{statistics.median(run.cpu_ratios()):.2f}x"
        )
        for route in REFERENCES:
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
    path = save(runs, args)
    print(f"\nSaved {path}\nResults are noisy: compare ratios within one run, repeat the run.")
    return 0 if all(v == "PASS" for v in verdicts) else 1


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
        "bars": BARS,
        "engines": {
            run.engine: {
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
                **reference_record(run, DRIVER_ROUTE, "driver"),
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
