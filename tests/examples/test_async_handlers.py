"""examples/async_handlers: coroutine handlers and middleware in-process, then five waits at
once on one real worker."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from examples.async_handlers import server
from socketify.testing import TestClient
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(60)


def test_a_wait_answers_after_its_await_and_bad_input_is_a_422() -> None:
    client = TestClient(server)
    assert client.get("/wait", query={"ms": "20"}).json() == {"waited_ms": 20}
    for bad in ("-1", "abc", "5001"):
        answer = client.get("/wait", query={"ms": bad})
        assert answer.status == 422, bad
        assert "up to 5000" in answer.json()["error"]


def test_gathered_waits_overlap_instead_of_adding_up() -> None:
    answer = TestClient(server).get("/parallel").json()
    assert answer["waits_ms"] == [200, 200, 200]
    assert 200 <= answer["elapsed_ms"] < 600  # one after another would take 600 at least


def test_the_async_middleware_times_blocking_and_async_routes_alike() -> None:
    client = TestClient(server)
    for path in ("/", "/wait?ms=1"):
        assert client.get(path).headers["Server-Timing"].startswith("app;dur="), path


def test_one_worker_serves_five_one_second_waits_at_once(serve: Launcher) -> None:
    running = serve("examples.async_handlers:server", workers=1)
    url = f"{running.url}/wait?ms=1000"
    started = time.monotonic()
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda _: requests.get(url, timeout=10), range(5)))
    elapsed = time.monotonic() - started
    assert [answer.json() for answer in answers] == [{"waited_ms": 1000}] * 5
    assert elapsed < 4.5  # one after another they would take 5 s
