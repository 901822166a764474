"""`socketify run --workers 2` on the shared table: a worker killed with `kill -9` while
requests are in flight loses no session, and limits stay global with its replacement."""

from __future__ import annotations

import http.client
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.state.test_live_workers import fetch, wait_for_workers
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(serve: Launcher) -> Iterator[ServerProcess]:
    """A fresh server, so that the rate-limit buckets start full."""
    with serve("tests.state.apps.state_app:server", workers=2) as live:
        pids: set[int] = set()
        deadline = time.monotonic() + 20
        while len(pids) < 2 and time.monotonic() < deadline:  # both workers serving
            try:
                pids.add(fetch(live, "/pid")[1])
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
        yield live


def test_each_worker_runs_the_store_on_the_shared_table(server: ServerProcess) -> None:
    kinds: dict[int, str] = {}
    deadline = time.monotonic() + 10
    while len(kinds) < 2 and time.monotonic() < deadline:
        data = fetch(server, "/store-kind")[1]
        kinds[data["pid"]] = data["kind"]
    assert list(kinds.values()) == ["TableStore", "TableStore"]


def test_kill_9_under_load_loses_no_session_and_limits_stay_global(server: ServerProcess) -> None:
    stop = threading.Event()
    results: list[tuple[str, int, int, list[int]]] = []  # (cookie, successes, failures, ns)
    problems: list[str] = []

    def client() -> None:
        try:
            _, data, cookie = fetch(server, "/count")
        except (OSError, http.client.HTTPException) as exc:
            problems.append(f"the first request failed: {exc!r}")
            return
        ns, failures = [data["n"]], 0
        while not stop.is_set():
            try:
                status, data, cookie_now = fetch(server, "/count", cookie)
            except (OSError, http.client.HTTPException):
                failures += 1  # the killed worker's connection: the write may or may not be in
                continue
            if status != 200 or cookie_now.split(".")[0] != cookie.split(".")[0]:
                problems.append(f"status {status}, cookie {cookie_now!r} after {cookie!r}")
                return
            if data["n"] <= ns[-1]:
                problems.append(f"session went back from {ns[-1]} to {data['n']}")
                return
            ns.append(data["n"])
        results.append((cookie, len(ns), failures, ns))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    victim = server.workers()[0]
    os.kill(victim, signal.SIGKILL)
    time.sleep(1.5)
    stop.set()
    for thread in threads:
        thread.join()
    assert not problems, problems[:3]
    assert len(results) == 8
    for cookie, successes, failures, ns in results:
        _, data, _ = fetch(server, "/peek", cookie)
        assert not data["new"], "a session was lost"
        # Every answered write is there; an unanswered one may be there too.
        assert ns[-1] <= data["n"] <= ns[-1] + failures
        assert successes >= 10

    wait_for_workers(server, 2, exclude={victim})
    statuses = [fetch(server, "/limited-by-default")[0] for _ in range(60)]
    assert statuses.count(200) == 20  # one bucket for the survivor and the replacement
    assert statuses.count(429) == 40


def test_concurrent_requests_on_one_session_across_workers_keep_each_others_keys(
    server: ServerProcess,
) -> None:
    _, _, cookie = fetch(server, "/mark/first")
    problems: list[str] = []
    pids: set[int] = set()

    def client(name: str) -> None:
        for expected in range(1, 151):
            try:
                status, data, _ = fetch(server, f"/mark/{name}", cookie)
            except (OSError, http.client.HTTPException) as exc:
                problems.append(f"{name}: {exc!r}")
                return
            if status != 200 or data["mine"] != expected:  # its own last write, always
                problems.append(f"{name}: request {expected} answered {status} {data}")
                return
            pids.add(data["pid"])

    threads = [threading.Thread(target=client, args=(f"c{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not problems, problems[:3]
    assert len(pids) == 2  # both workers wrote the session
    data = fetch(server, "/session-data", cookie)[1]
    assert {name: data[name] for name in data if name[0] == "c"} == {f"c{n}": 150 for n in range(6)}
    assert data["first"] == 1


def test_without_the_table_the_master_serves_every_operation(serve: Launcher) -> None:
    env = {"SOCKETIFY_STATE_TABLE": "0"}
    with serve("tests.state.apps.state_app:server", workers=2, env=env) as live:
        kinds: dict[int, str] = {}
        cookie = ""
        deadline = time.monotonic() + 20
        while len(kinds) < 2 and time.monotonic() < deadline:
            try:
                data = fetch(live, "/store-kind")[1]
                _, counted, cookie = fetch(live, "/count", cookie)
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
                continue
            kinds[data["pid"]] = data["kind"]
        assert list(kinds.values()) == ["StateClient", "StateClient"]
        assert fetch(live, "/peek", cookie)[1]["n"] == counted["n"]


def test_logins_past_what_the_table_holds_keep_every_session_until_the_store_is_full(
    serve: Launcher,
) -> None:
    # A table of a quarter MiB: 32 slots of 1 KiB and 16 of 4 KiB for these 600-byte
    # sessions, so most of them go to the master's store, and none may be lost on the way.
    env = {"SOCKETIFY_STATE_TABLE_MB": "0.25"}
    with serve("tests.state.apps.state_app:server", workers=2, env=env) as live:
        cookies = [fetch(live, "/mark/login")[2] for _ in range(400)]
        kept = [fetch(live, "/session-data", cookie)[1].get("login") for cookie in cookies]
    assert kept == [1] * len(cookies)
