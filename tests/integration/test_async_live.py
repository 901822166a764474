"""`async def` handlers through the real `socketify run`: asyncio libraries, concurrency, errors.

One module-scoped server (tests/integration/apps/async_app.py, one worker, so every request
shares one worker's event loop) and a plain blocking server for httpx.AsyncClient to call.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import httpx
import pytest
import requests
from websockets.sync.client import connect

from tests.support.serve import Launcher, ServerProcess
from tests.support.services import require_module, require_service
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, str, ServerProcess]]:
    """The async app, the URL of a plain server's /ping, and the app with request_timeout."""
    with Launcher(tmp_path_factory.mktemp("async-live")) as launcher:
        app = launcher("tests.integration.apps.async_app:server", workers=1, wait=False)
        other = launcher("tests.support.apps.basic:server", workers=1, wait=False)
        timed = launcher("tests.integration.apps.async_app:timed", workers=1, wait=False)
        for server in (app, other, timed):
            server.wait_serving()
        yield app, f"{other.url}/ping", timed


@pytest.fixture
def live(servers: tuple[ServerProcess, str, ServerProcess]) -> ServerProcess:
    return servers[0]


def test_an_async_handler_awaits_asyncio_sleep_and_answers(live: ServerProcess) -> None:
    answer = requests.get(f"{live.url}/sleep", params={"s": "0.05"}, timeout=5)
    assert answer.status_code == 200
    assert answer.json()["slept"] == 0.05
    assert answer.headers["X-Async-Middleware"].endswith("ms")


def test_an_async_handler_uses_httpx_async_client(
    servers: tuple[ServerProcess, str, ServerProcess],
) -> None:
    live, ping_url, _ = servers
    answer = requests.get(f"{live.url}/fetch", params={"url": ping_url}, timeout=10)
    assert answer.json() == {"status": 200, "body": requests.get(ping_url, timeout=5).text}


def test_a_hundred_slow_async_requests_share_one_worker_and_finish_in_about_one_sleep(
    live: ServerProcess,
) -> None:
    async def many() -> list[int]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(timeout=20, limits=limits) as client:
            import asyncio

            replies = await asyncio.gather(
                *(client.get(f"{live.url}/sleep", params={"s": "1"}) for _ in range(100))
            )
        return [reply.status_code for reply in replies]

    import asyncio

    started = time.monotonic()
    statuses = asyncio.run(many())
    elapsed = time.monotonic() - started
    assert statuses == [200] * 100
    # One after the other they would take 100 s; the bound leaves room for a loaded machine.
    assert elapsed < 10.0, f"100 concurrent 1 s sleeps took {elapsed:.1f} s"


def _answers_while_busy(live: ServerProcess, busy_path: str) -> None:
    """An async request sent while `busy_path` sleeps 2 s is answered before it."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(requests.get, f"{live.url}{busy_path}?s=2", timeout=20)
        time.sleep(0.2)  # the busy request is being served
        quick = requests.get(f"{live.url}/sleep", params={"s": "0"}, timeout=20)
        answered_first = not busy.done()
        assert quick.status_code == 200 and busy.result().status_code == 200
    assert answered_first, f"an async request waited for {busy_path}"


def test_async_and_blocking_handlers_do_not_hold_each_other_up(live: ServerProcess) -> None:
    _answers_while_busy(live, "/sync")


def test_asyncio_to_thread_keeps_blocking_calls_off_the_event_loop(live: ServerProcess) -> None:
    _answers_while_busy(live, "/offloaded")


def test_async_exceptions_answer_500_and_http_errors_their_status(live: ServerProcess) -> None:
    boom = requests.get(f"{live.url}/boom", timeout=5)
    assert boom.status_code == 500 and "async failure" not in boom.text
    missing = requests.get(f"{live.url}/missing", timeout=5)
    assert (missing.status_code, missing.text) == (404, "nothing here\n")
    assert requests.get(f"{live.url}/sleep?s=0", timeout=5).status_code == 200  # still serving
    live.wait_output("RuntimeError: async failure", timeout=5)


def test_an_async_middleware_answers_without_next(live: ServerProcess) -> None:
    denied = requests.get(f"{live.url}/sleep", headers={"X-Deny": "1"}, timeout=5)
    assert (denied.status_code, denied.text) == (403, "denied by async middleware\n")


def test_an_async_handler_reads_a_streamed_body(live: ServerProcess) -> None:
    payload = b"x" * 300_000
    answer = requests.post(f"{live.url}/echo", data=iter([payload[:1000], payload[1000:]]))
    assert answer.json() == {"length": len(payload)}


def test_async_websocket_callbacks_answer(live: ServerProcess) -> None:
    with connect(f"ws://127.0.0.1:{live.port}/ws", open_timeout=5) as ws:
        ws.send("hi")
        assert ws.recv(timeout=5) == "async echo: hi"
        ws.send(b"\x01\x02")
        assert ws.recv(timeout=5) == b"\x01\x02"


def test_a_request_timeout_cancels_the_async_handler_and_answers_503(
    servers: tuple[ServerProcess, str, ServerProcess],
) -> None:
    timed = servers[2]
    started = time.monotonic()
    answer = requests.get(f"{timed.url}/hang", params={"id": "first"}, timeout=10)
    assert answer.status_code == 503 and time.monotonic() - started < 5
    wait_for(
        lambda: requests.get(f"{timed.url}/cancelled", timeout=5).json() == ["first"],
        timeout=5,
        message="the timed-out handler's Task to be cancelled",
    )


def test_an_async_handler_reads_the_body_over_http2(live: ServerProcess) -> None:
    with httpx.Client(http1=False, http2=True, timeout=10) as client:
        answer = client.post(f"{live.url}/echo", content=b"y" * 200_000)
    assert (answer.http_version, answer.json()) == ("HTTP/2", {"length": 200_000})


def test_an_async_handler_queries_postgresql_with_asyncpg_concurrently(
    live: ServerProcess,
) -> None:
    require_module("asyncpg", "pip install -e '.[test]'")
    require_service("PostgreSQL", "127.0.0.1", 5432)
    assert requests.get(f"{live.url}/pg", timeout=10).json() == {"value": 42}
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        started = time.monotonic()
        answers = list(
            pool.map(lambda _: requests.get(f"{live.url}/pg?s=0.5", timeout=10), range(10))
        )
        elapsed = time.monotonic() - started
    assert [answer.json() for answer in answers] == [{"value": 42}] * 10
    # One after the other they would take 5 s.
    assert elapsed < 4.0, f"10 concurrent 0.5 s queries on one worker took {elapsed:.1f} s"
