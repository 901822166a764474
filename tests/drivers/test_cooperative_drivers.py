"""One worker, one request waiting a second in its database or Redis driver, and /ping on the
same worker answering all along: every driver an app reaches waits cooperatively, whether it
was imported in the worker, before the fork (`--preload`) or before patching (`--workers 0`),
unless the switch turns it off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.raw_client import Address, get
from tests.support.serve import Launcher, ServerProcess
from tests.support.services import require_module, require_service

pytestmark = pytest.mark.timeout(120)

APP = "tests.drivers.sleepy_app:app"
PING_BOUND_S = 0.5  # the request waits 1 s: a blocked worker answers /ping only after it
SERVICES = {"postgres": 5432, "mysql": 3306, "redis": 6379}
ROUTES = {
    "/psycopg2": "postgres",
    "/psycopg3": "postgres",
    "/sqlalchemy": "postgres",
    "/django": "postgres",
    "/pymysql": "mysql",
    "/redis": "redis",
}


def pings_during(address: Address, route: str) -> list[float]:
    """The latencies of the /pings answered while a request to `route` was in flight."""
    answered: list[tuple[float, float]] = []  # (when answered, latency)
    slow: dict[str, object] = {}

    def request_slow() -> None:
        slow["status"] = get(address, route, timeout=10).status
        slow["done"] = time.monotonic()

    thread = threading.Thread(target=request_slow)
    thread.start()
    time.sleep(0.1)  # the slow request is under way
    while thread.is_alive():
        started = time.monotonic()
        assert get(address, "/ping", timeout=10).body == b"pong\n"
        answered.append((time.monotonic(), time.monotonic() - started))
        time.sleep(0.02)
    thread.join()
    assert slow["status"] == 200
    done = slow["done"]
    assert isinstance(done, float)
    return [latency for when, latency in answered if when < done]


def require_services() -> None:
    for name, port in SERVICES.items():
        require_service(name, "127.0.0.1", port)
    for module in ("psycopg2", "psycopg", "sqlalchemy", "django", "pymysql", "redis"):
        require_module(module, "pip install -e '.[test]'")


@pytest.fixture(scope="module", params=["forked", "preloaded", "in-process"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    require_services()
    args = ["--preload"] if request.param == "preloaded" else []
    workers = 0 if request.param == "in-process" else 1  # 0: the app imported, then patched
    with Launcher(tmp_path_factory.mktemp("drivers")) as launch:
        yield launch(APP, workers=workers, args=args)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_ping_keeps_answering_while_a_driver_waits_a_second(
    server: ServerProcess, route: str
) -> None:
    latencies = pings_during(server.tcp, route)
    assert len(latencies) >= 5, latencies
    assert max(latencies) < PING_BOUND_S, latencies


@pytest.mark.parametrize("route", ["/psycopg2", "/psycopg3"])
def test_with_the_switch_off_a_c_driver_blocks_the_worker(serve: Launcher, route: str) -> None:
    require_services()
    # Preloaded, so psycopg 3 too kept the C wait it chose before the worker patched.
    server = serve(APP, workers=1, args=["--preload"], env={"SOCKETIFY_COOPERATIVE_DRIVERS": "0"})
    latencies = pings_during(server.tcp, route)
    assert len(latencies) <= 1, latencies  # at most one slipped in before the query began


def test_an_app_that_imports_mysqlclient_is_warned_once_per_start(serve: Launcher) -> None:
    require_module("MySQLdb", "pip install mysqlclient")
    server = serve("tests.drivers.blocking_driver_app:app", workers=2)
    assert get(server.tcp, "/").body == b"pong\n"
    assert server.output().count("mysqlclient (MySQLdb) blocks the whole worker") == 1


def test_the_switch_silences_the_mysqlclient_warning(serve: Launcher) -> None:
    require_module("MySQLdb", "pip install mysqlclient")
    server = serve(
        "tests.drivers.blocking_driver_app:app",
        workers=1,
        env={"SOCKETIFY_COOPERATIVE_DRIVERS": "0"},
    )
    assert get(server.tcp, "/").body == b"pong\n"
    assert "mysqlclient" not in server.output()
