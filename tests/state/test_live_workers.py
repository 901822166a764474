"""The real `socketify run --workers 2`: sessions, limits, cache and bus span the workers."""

from __future__ import annotations

import http.client
import os
import signal
import threading
import time
from typing import Any

import orjson
import pytest

from tests.support.serve import ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(120)


def fetch(server: ServerProcess, path: str, cookie: str = "") -> tuple[int, Any, str]:
    """One request on a new connection (the kernel picks the worker); (status, json, cookie)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        headers = {"Connection": "close", **({"Cookie": cookie} if cookie else {})}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read()
        set_cookie = response.getheader("Set-Cookie") or ""
    finally:
        conn.close()
    data = orjson.loads(body) if body[:1] in (b"{", b"[") else body
    return response.status, data, set_cookie.split(";")[0] or cookie


def wait_for_workers(server: ServerProcess, count: int, exclude: set[int]) -> list[int]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pids = [p for p in server.workers() if p not in exclude]
        if len(pids) == count:
            seen = {fetch(server, "/pid")[1] for _ in range(20)}
            if {int(p) for p in seen} <= set(pids):
                return pids
        time.sleep(0.1)
    raise AssertionError(f"workers did not come back: {server.workers()}")


def test_10000_requests_alternating_across_workers_lose_no_session_write(
    two_workers: ServerProcess,
) -> None:
    clients, per_client = 20, 500
    finals: list[int] = []
    pids: set[int] = set()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            cookie = ""
            for expected in range(1, per_client + 1):
                status, data, cookie = fetch(two_workers, "/count", cookie)
                assert status == 200 and data["n"] == expected, (expected, data)
                pids.add(data["pid"])
            finals.append(expected)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert finals == [per_client] * clients
    assert len(pids) == 2  # both workers wrote and read the sessions


def test_a_session_survives_kill_9_of_the_worker_that_wrote_it(two_workers: ServerProcess) -> None:
    _, data, cookie = fetch(two_workers, "/count")
    writer = data["pid"]
    for _ in range(5):
        _, data, cookie = fetch(two_workers, "/count", cookie)
    n = data["n"]
    os.kill(writer, signal.SIGKILL)
    wait_for_workers(two_workers, 2, exclude={writer})
    for _ in range(10):
        _, data, _ = fetch(two_workers, "/peek", cookie)
        assert data["n"] == n and not data["new"]
        assert data["pid"] != writer


def test_a_session_survives_a_hup_reload(two_workers: ServerProcess) -> None:
    _, data, cookie = fetch(two_workers, "/count")
    for _ in range(3):
        _, data, cookie = fetch(two_workers, "/count", cookie)
    before = set(two_workers.workers())
    two_workers.signal(signal.SIGHUP)
    wait_for(lambda: not set(two_workers.workers()) & before, 20, message="the reload")
    _, after, _ = fetch(two_workers, "/count", cookie)
    assert after["n"] == data["n"] + 1


def test_a_shared_cache_entry_is_seen_by_every_worker(two_workers: ServerProcess) -> None:
    fetch(two_workers, "/cache/set/colour/blue")
    seen = {}
    for _ in range(30):
        _, data, _ = fetch(two_workers, "/cache/get/colour")
        seen[data["pid"]] = data["value"]
    assert set(seen.values()) == {"blue"} and len(seen) == 2


def test_the_default_rate_limit_store_is_shared_by_the_workers(two_workers: ServerProcess) -> None:
    statuses: list[int] = []
    pids: set[int] = set()
    for _ in range(60):
        status, data, _ = fetch(two_workers, "/limited-by-default")
        statuses.append(status)
        if status == 200:
            pids.add(data["pid"])
    assert statuses.count(200) == 20  # not 20 per worker
    assert statuses.count(429) == 40
    assert len(pids) == 2


def test_a_100_per_minute_limit_holds_within_2_across_two_workers(
    two_workers: ServerProcess,
) -> None:
    started = time.monotonic()
    statuses: list[int] = []
    pids: set[int] = set()
    lock = threading.Lock()

    def hammer() -> None:
        for _ in range(40):
            status, data, _ = fetch(two_workers, "/limited")
            with lock:
                statuses.append(status)
                if status == 200:
                    pids.add(data["pid"])

    threads = [threading.Thread(target=hammer) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    allowed = statuses.count(200)
    assert statuses.count(429) == len(statuses) - allowed
    refilled = elapsed * 100 / 60
    assert 100 <= allowed <= 100 + refilled + 1, (allowed, elapsed)
    assert abs(allowed - 100) <= 2 or elapsed > 1.2
    assert len(pids) == 2


def subscribe_everywhere(server: ServerProcess, count: int) -> set[int]:
    pids: set[int] = set()
    deadline = time.monotonic() + 10
    while len(pids) < count and time.monotonic() < deadline:
        pids.add(fetch(server, "/bus/subscribe")[1]["pid"])
    assert len(pids) == count
    return pids


def received_everywhere(server: ServerProcess, pids: set[int], publisher: int, n: int) -> None:
    got: dict[int, list[int]] = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _, data, _ = fetch(server, "/bus/received")
        got[data["pid"]] = data["received"].get(str(publisher), [])
        if set(got) >= pids and all(got[p] == list(range(n)) for p in pids):
            return
    raise AssertionError({p: (len(v), v[:5]) for p, v in got.items()})


def test_the_bus_reaches_every_worker_once_in_order_even_after_kill_9(
    two_workers: ServerProcess,
) -> None:
    pids = subscribe_everywhere(two_workers, 2)
    _, data, _ = fetch(two_workers, "/bus/publish/500")
    received_everywhere(two_workers, pids, data["pid"], 500)
    victim = next(iter(pids))
    os.kill(victim, signal.SIGKILL)
    survivors = set(wait_for_workers(two_workers, 2, exclude={victim}))
    pids = subscribe_everywhere(two_workers, 2)
    assert pids == survivors
    _, data, _ = fetch(two_workers, "/bus/publish/300")
    publisher = data["pid"]
    received = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(received) < 2:
        _, got, _ = fetch(two_workers, "/bus/received")
        mine = got["received"].get(str(publisher), [])
        if mine[-300:] == list(range(300)):
            received[got["pid"]] = True
    assert len(received) == 2  # the respawned worker is on the bus
