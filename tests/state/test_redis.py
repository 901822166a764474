"""Redis backends against the real local Redis, and two `socketify run` masters ("hosts")
sharing sessions and a rate limit through it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import orjson
import pytest

from load_tests.redis_server import PrivateRedis
from tests.state.test_live_workers import fetch
from tests.support.serve import REPO, Launcher
from tests.support.services import require_module, require_service

pytestmark = pytest.mark.timeout(90)
URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def prefix() -> Iterator[str]:
    require_service("Redis", "127.0.0.1", 6379)
    require_module("redis", "pip install 'socketify-gevent[redis]'")
    name = f"socketify-test:{uuid.uuid4().hex}:"
    yield name
    import redis

    client = redis.Redis.from_url(URL)
    for key in client.scan_iter(match=f"*{name}*"):  # RedisStore adds its own prefix
        client.delete(key)
    client.close()


def test_redis_store_values_ttls_counters_and_prefixes(prefix: str) -> None:
    from socketify.state.redis import RedisStore

    store = RedisStore(URL, prefix=prefix)
    store.set("a", b"1", ttl=0.2)
    store.set("b", b"2")
    assert store.get("a") == b"1"
    time.sleep(0.3)
    assert store.get("a") is None
    assert store.incr("n", 5, ttl=10) == 5 and store.incr("n", 2, ttl=1) == 7
    assert 9 < store.redis.pttl(prefix + "n") / 1000 <= 10  # the TTL of the creation
    assert store.delete("b") and not store.delete("b")
    for n in range(7):
        store.set(f"cache:{n}", b"x")
    assert store.count_prefix("cache:") == 7
    assert store.clear_prefix("cache:") == 7
    assert store.count_prefix("cache:") == 0


def test_redis_take_is_atomic_under_concurrent_callers(prefix: str) -> None:
    from socketify.state.redis import RedisStore

    store = RedisStore(URL, prefix=prefix)
    allowed: list[bool] = []

    def take() -> None:
        for _ in range(30):
            allowed.append(store.take("bucket", 50, 0.0).allowed)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 50
    assert store.take("bucket", 50, 0.0).reset_seconds == float("inf")


def test_redis_bus_delivers_each_message_once_in_order_to_every_subscriber(prefix: str) -> None:
    from socketify.state.redis import RedisBus

    buses = [RedisBus(URL, prefix=prefix) for _ in range(3)]
    got: list[list[bytes]] = [[] for _ in buses]
    for bus, inbox in zip(buses, got, strict=True):
        bus.subscribe("room", inbox.append)
    for n in range(200):
        buses[0].publish("room", b"%d" % n)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(len(inbox) < 200 for inbox in got):
        time.sleep(0.02)
    for inbox in got:
        assert inbox == [b"%d" % n for n in range(200)]
    for bus in buses:
        bus.close()


def test_two_masters_sharing_one_redis_share_sessions_and_a_rate_limit(
    serve: Launcher, prefix: str
) -> None:
    env = {"SOCKETIFY_STATE_URL": URL, "STATE_TEST_NAMESPACE": prefix}
    app = "tests.state.apps.state_app:server"
    host_a = serve(app, workers=2, env=env, wait=False)
    host_b = serve(app, workers=2, env=env, wait=False)  # the two boots overlap
    with host_a.wait_serving(), host_b.wait_serving():
        cookie = ""
        for n in range(1, 41):  # alternate hosts, as a load balancer would
            host = host_a if n % 2 else host_b
            status, data, cookie = fetch(host, "/count", cookie)
            assert status == 200 and data["n"] == n
        statuses = [fetch(host_a if n % 2 else host_b, "/limited")[0] for n in range(140)]
        assert 100 <= statuses.count(200) <= 102
        assert statuses.count(429) == 140 - statuses.count(200)


def test_compare_and_set_writes_only_over_the_expected_value(prefix: str) -> None:
    from socketify.state.redis import RedisStore

    store = RedisStore(URL, prefix=prefix)
    assert store.compare_and_set("k", None, b"v1", ttl=30)  # absent: written
    assert not store.compare_and_set("k", None, b"v2")  # no longer absent
    assert not store.compare_and_set("k", b"other", b"v2")
    assert store.get("k") == b"v1"
    assert 29 < store.redis.pttl(prefix + "k") / 1000 <= 30
    assert store.compare_and_set("k", b"v1", b"v2")  # no ttl: no expiry
    assert store.get("k") == b"v2" and store.redis.pttl(prefix + "k") == -1
    assert not store.compare_and_set("gone", b"v1", b"x")  # absent is not any value
    assert store.compare_and_set("bin", None, b"\x00\xff") and store.get("bin") == b"\x00\xff"
    assert store.compare_and_set("bin", b"\x00\xff", b"\x00") and store.get("bin") == b"\x00"
    with pytest.raises(TypeError):
        store.compare_and_set("k", b"v2", "text")  # type: ignore[arg-type]


def test_compare_and_set_lets_exactly_one_of_many_racing_writers_win(prefix: str) -> None:
    from socketify.state.redis import RedisStore

    store = RedisStore(URL, prefix=prefix)
    store.set("counter", b"0")
    wins: list[int] = []

    def increment(times: int) -> None:
        for _ in range(times):
            while True:  # the usual optimistic loop: read, compute, write if unchanged
                current = store.get("counter")
                assert current is not None
                if store.compare_and_set("counter", current, b"%d" % (int(current) + 1)):
                    wins.append(1)
                    break

    threads = [threading.Thread(target=increment, args=(50,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get("counter") == b"200" and len(wins) == 200


def test_a_bounded_store_keeps_at_most_max_entries_evicting_the_soonest_expiring(
    prefix: str,
) -> None:
    from socketify.state.redis import RedisStore

    store = RedisStore(URL, prefix=prefix, max_entries=3, bounded_prefix="sess:")
    for n in range(5):
        store.set(f"sess:{n}", b"x", ttl=100 + n)  # sess:0 expires first
    assert [store.get(f"sess:{n}") for n in range(5)] == [None, None, b"x", b"x", b"x"]
    assert store.compare_and_set("sess:5", None, b"y", ttl=1000)
    assert store.get("sess:2") is None and store.count_prefix("sess:") == 3
    # The key just written stays, even when it is the soonest to expire.
    store.set("sess:short", b"z", ttl=5)
    assert store.get("sess:short") == b"z" and store.get("sess:3") is None
    assert store.redis.zcard(store.index_key) == 3
    # Keys outside the bounded prefix, or without a TTL, are not counted.
    for n in range(10):
        store.set(f"other:{n}", b"o", ttl=100)
    store.set("sess:forever", b"f")
    assert store.count_prefix("other:") == 10 and store.get("sess:forever") == b"f"
    assert store.redis.zcard(store.index_key) == 3
    # A delete frees its place; clear_prefix empties the index too.
    assert store.delete("sess:short") and store.redis.zcard(store.index_key) == 2
    store.set("sess:6", b"x", ttl=100)
    assert store.get("sess:4") == b"x"  # nothing evicted: there was room
    assert store.clear_prefix("sess:") == 4
    assert not store.redis.exists(store.index_key)


def test_a_bounded_store_forgets_expired_keys_and_its_index_expires_with_them(
    prefix: str,
) -> None:
    from socketify.state.redis import RedisStore

    store = RedisStore(URL, prefix=prefix, max_entries=2, bounded_prefix="sess:")
    store.set("sess:a", b"1", ttl=0.2)
    store.set("sess:b", b"2", ttl=0.2)
    assert 0 < store.redis.pttl(store.index_key) <= 200
    deadline = time.monotonic() + 5
    while store.get("sess:a") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    store.set("sess:c", b"3", ttl=100)
    store.set("sess:d", b"4", ttl=100)  # the expired entries left; nothing live was evicted
    assert store.get("sess:c") == b"3" and store.get("sess:d") == b"4"
    assert store.redis.zcard(store.index_key) == 2


def test_shared_store_passes_its_bound_to_redis_and_keeps_it_without_namespace(
    prefix: str,
) -> None:
    from socketify.state.shared_store import SharedStore

    store = SharedStore(prefix + "sess:", url=URL, max_entries=2)
    plain = store.without_namespace()
    for n in range(3):
        store.set(f"{n}", b"x", ttl=100 + n)
    plain.set(f"{prefix}sess:3", b"x", ttl=200)  # the same bound, prefixed by the caller
    assert [store.get(f"{n}") for n in range(4)] == [None, None, b"x", b"x"]
    with pytest.raises(ValueError):
        SharedStore("sess:", url=URL, max_entries=0)


# -- outages -------------------------------------------------------------------------------


def test_the_connect_timeout_bounds_a_connection_nobody_accepts() -> None:
    """A listener whose backlog is full drops the SYN: only the connect timeout ends it."""
    require_module("redis", "pip install 'socketify-gevent[redis]'")
    from socketify.core.errors import StateUnavailable
    from socketify.state.redis import RedisStore

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        try:
            store = RedisStore(f"redis://127.0.0.1:{port}/0", connect_timeout=0.3, timeout=10)
            started = time.monotonic()
            with pytest.raises(StateUnavailable, match="Timeout connecting"):
                store.get("x")
            assert 0.25 < time.monotonic() - started < 1.5
        finally:
            for filler in fillers:
                filler.close()


GEVENT_PROBE = """
from gevent import monkey
monkey.patch_all()
import json, os, signal, sys, time
import gevent
from socketify.state.redis import RedisStore
from socketify.core.errors import StateUnavailable

store = RedisStore(sys.argv[1])
store.set("probe", b"1")
os.kill(int(sys.argv[2]), signal.SIGSTOP)
ticks = []
ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(1000)])

def get():
    started = time.monotonic()
    try:
        store.get("probe")
        outcome = "served"
    except StateUnavailable:
        outcome = "503"
    return outcome, time.monotonic() - started

first = [gevent.spawn(get) for _ in range(20)]
gevent.joinall(first)
ticked = len(ticks)
ticker.kill()
print(json.dumps({"first": [g.value for g in first], "ticks": ticked, "then": get()}))
"""


def test_under_gevent_the_command_timeout_fires_without_blocking_the_hub(
    private_redis: PrivateRedis,
) -> None:
    """Worker processes are monkey-patched: a stopped Redis must cost each waiting greenlet
    the timeout, not the whole process."""
    result = subprocess.run(
        [sys.executable, "-c", GEVENT_PROBE, private_redis.url, str(private_redis.pid)],
        capture_output=True,
        timeout=30,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr.decode()
    report = orjson.loads(result.stdout.splitlines()[-1])
    assert {outcome for outcome, _ in report["first"]} == {"503"}
    assert all(0.9 < elapsed < 2.0 for _, elapsed in report["first"])  # the 1 s default
    assert report["ticks"] >= 30  # the hub kept running other greenlets meanwhile
    outcome, elapsed = report["then"]
    assert outcome == "503" and elapsed < 0.1  # the breaker is open: no second wait
    assert b"answering 503 until it returns" in result.stderr
    assert b"Traceback" not in result.stderr


def test_sessions_on_redis_stay_within_max_sessions(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redis

    from socketify import Server
    from socketify.state import sessions
    from socketify.testing import TestClient

    monkeypatch.setenv("SOCKETIFY_STATE_URL", URL)
    server = Server()
    server.use(sessions.middleware("s" * 32, key_prefix=prefix + "sess:", max_sessions=5))

    @server.get("/visit")
    def visit(req, res):  # type: ignore[no-untyped-def]
        req.session["n"] = req.session.get("n", 0) + 1
        res.json({"id": req.session.id})

    ids = [TestClient(server).get("/visit").json()["id"] for _ in range(12)]  # anonymous
    client = redis.Redis.from_url(URL)
    stored = [key for key in client.scan_iter(match=f"socketify:{prefix}sess:*")]
    client.close()
    assert len(set(ids)) == 12
    assert 0 < len(stored) <= 5  # the oldest were evicted as new ones came
    assert any(key.decode().endswith(ids[-1]) for key in stored)  # the newest is kept
