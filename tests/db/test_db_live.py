"""The real `socketify run --workers 1` with a database: the pool bound seen from the
PostgreSQL server under 500 concurrent requests, and per-greenlet sessions (with and without
--preload)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.db.db_support import mysql_admin, pg_admin
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.usefixtures("fast_path")


def get(port: int, path: str, timeout: float = 60.0) -> tuple[int, bytes]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        con.request("GET", path)
        response = con.getresponse()
        return response.status, response.read()
    finally:
        con.close()


def db_app(serve: Launcher, url: str, *args: str, workers: int = 1, **env: str) -> ServerProcess:
    """`socketify run tests.db.apps.db_live_app:server` on the database at `url`."""
    app = "tests.db.apps.db_live_app:server"
    return serve(app, workers=workers, args=args, env={"DB_URL": url, **env})


def count_connections(admin: Any, app_name: str) -> int:
    with admin.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app_name,)
        )
        return int(cursor.fetchone()[0])


class Sampler(threading.Thread):
    """Polls `measure()` every 10 ms until stopped; keeps the maximum."""

    def __init__(self, measure: Callable[[], int]) -> None:
        super().__init__(daemon=True)
        self.measure = measure
        self.peak = 0
        self.samples = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.peak = max(self.peak, self.measure())
            self.samples += 1
            time.sleep(0.01)

    def stop(self) -> int:
        self.stopping.set()
        self.join(5)
        return self.peak


def test_postgres_connections_stay_within_pool_size_under_500_concurrent_requests(
    serve: Launcher, pg_url: str
) -> None:
    app_name = pg_url.split("application_name=")[1]
    admin: Any = pg_admin()
    cursor = admin.cursor()

    def server_connections() -> int:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app_name,)
        )
        return int(cursor.fetchone()[0])

    with db_app(serve, pg_url, POOL_SIZE="8", POOL_TIMEOUT="30") as server:
        sampler = Sampler(server_connections)
        sampler.start()
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=500) as clients:
            statuses = list(clients.map(lambda _: get(server.port, "/hold?ms=50")[0], range(500)))
        elapsed = time.monotonic() - started
        peak = sampler.stop()
        stats = json.loads(get(server.port, "/stats")[1])
        log = server.output()
    admin.close()
    print(
        f"\n500 concurrent requests, 50 ms of server-side work each, pool_size=8: "
        f"{elapsed:.2f} s, peak server-side connections {peak} "
        f"({sampler.samples} samples), worker pool peak {stats['peak']}, opened {stats['opened']}"
    )
    assert statuses == [200] * 500, log
    assert peak <= 8
    assert stats["peak"] == 8 and stats["opened"] <= 8 and stats["timeouts"] == 0
    assert stats["in_use"] == 0  # every session gave its connection back
    assert elapsed >= 500 * 0.05 / 8 * 0.9  # the work really was spread over 8 connections


@pytest.mark.parametrize("preload", [False, True])
def test_concurrent_requests_in_one_worker_do_not_share_a_session(
    serve: Launcher, sqlite_url: str, preload: bool
) -> None:
    with db_app(serve, sqlite_url, *(["--preload"] if preload else [])) as server:
        results: dict[str, Any] = {}

        def probe(tag: str, pause: str) -> None:
            results[tag] = json.loads(get(server.port, f"/probe/{tag}?pause={pause}")[1])

        first = threading.Thread(target=probe, args=("a", "0.3"))
        first.start()
        time.sleep(0.1)  # b starts while a's session is open and paused
        probe("b", "0.3")
        first.join(10)
        log = server.output()
    # a's session never saw b's note (b, the second writer, waits for a's commit).
    assert results["a"] == ["a"], log
    assert results["b"] == ["a", "b"], log


def test_pool_exhaustion_answers_503_on_the_wire(serve: Launcher, sqlite_url: str) -> None:
    with db_app(serve, sqlite_url, POOL_SIZE="1", POOL_TIMEOUT="0.2") as server:
        holder = threading.Thread(target=get, args=(server.port, "/hold?ms=800"))
        holder.start()
        time.sleep(0.2)
        status, body = get(server.port, "/users/1")
        holder.join(10)
        after = get(server.port, "/users/1")
    assert status == 503
    assert json.loads(body)["error"].startswith("all 1 database connections are busy")
    assert after == (200, b'{"id":1,"name":"Ann"}')


def test_a_preloading_master_holds_no_connection_and_workers_connect_lazily(
    serve: Launcher, pg_url: str
) -> None:
    """The master imports the app (tables created, a user seeded), then forks two workers."""
    app_name = pg_url.split("application_name=")[1]
    admin: Any = pg_admin()
    with db_app(serve, pg_url, "--preload", workers=2, POOL_SIZE="3") as server:
        before = count_connections(admin, app_name)  # /ping ran, but no query yet
        with ThreadPoolExecutor(max_workers=20) as clients:
            statuses = set(clients.map(lambda _: get(server.port, "/hold?ms=20")[0], range(60)))
        after = count_connections(admin, app_name)
    admin.close()
    assert before == 0
    assert statuses == {200}
    assert 1 <= after <= 2 * 3


def _kill_postgres_queries(url: str) -> Callable[[], int]:
    """A function that ends every busy connection of the app at `url`; how many it ended."""
    app_name = url.split("application_name=")[1]
    admin: Any = pg_admin()

    def kill() -> int:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND state = 'active'",
                (app_name,),
            )
            return len(cursor.fetchall())

    return kill


def _kill_mysql_queries(url: str) -> Callable[[], int]:
    name = url.rsplit("/", 1)[1]
    admin: Any = mysql_admin()

    def kill() -> int:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM information_schema.processlist"
                " WHERE db = %s AND command = 'Query' AND info LIKE 'SELECT SLEEP%%'",
                (name,),
            )
            ids = [row[0] for row in cursor.fetchall()]
            for thread in ids:
                cursor.execute(f"KILL {int(thread)}")
            return len(ids)

    return kill


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_a_connection_killed_mid_query_answers_503_with_retry_after(
    serve: Launcher, request: pytest.FixtureRequest, engine: str
) -> None:
    url = str(request.getfixturevalue(f"{'pg' if engine == 'postgres' else 'mysql'}_url"))
    kill = (_kill_postgres_queries if engine == "postgres" else _kill_mysql_queries)(url)
    answers: list[tuple[int, dict[str, str], bytes]] = []

    def slow_request() -> None:
        con = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            con.request("GET", "/read-then-hold")
            response = con.getresponse()
            answers.append((response.status, dict(response.getheaders()), response.read()))
        finally:
            con.close()

    with db_app(serve, url, POOL_SIZE="2") as server:
        client = threading.Thread(target=slow_request)
        client.start()
        # Pony runs a query again once on a fresh connection when the first one is lost:
        # kill that one too, as a database that went away would.
        kills = 0
        deadline = time.monotonic() + 20
        while client.is_alive() and time.monotonic() < deadline:
            kills += kill()
            time.sleep(0.05)
        client.join(5)
        after = get(server.port, "/users/1")  # the pool replaced the dead connection
        log = server.output()
    ((status, headers, body),) = answers
    assert kills >= 1
    assert (status, headers.get("Retry-After")) == (503, "1"), log
    assert json.loads(body) == {"error": "database unavailable"}
    assert "Traceback" not in log
    assert after == (200, b'{"id":1,"name":"Ann"}')
