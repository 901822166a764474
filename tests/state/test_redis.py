"""Redis backends against the real local Redis, and two `socketify run` masters ("hosts")
sharing sessions and a rate limit through it."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from services import require_module, require_service
from test_live_workers import fetch

from socketify.testing import LiveServer

pytestmark = pytest.mark.timeout(90)
URL = "redis://127.0.0.1:6379/0"
HERE = Path(__file__).resolve().parent


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


def test_two_masters_sharing_one_redis_share_sessions_and_a_rate_limit(prefix: str) -> None:
    env = {"SOCKETIFY_STATE_URL": URL, "STATE_TEST_NAMESPACE": prefix}
    host_a = LiveServer("apps.state_app:server", workers=2, cwd=str(HERE), env=env)
    host_b = LiveServer("apps.state_app:server", workers=2, cwd=str(HERE), env=env)
    with host_a, host_b:
        cookie = ""
        for n in range(1, 41):  # alternate hosts, as a load balancer would
            host = host_a if n % 2 else host_b
            status, data, cookie = fetch(host, "/count", cookie)
            assert status == 200 and data["n"] == n
        statuses = [fetch(host_a if n % 2 else host_b, "/limited")[0] for n in range(140)]
        assert 100 <= statuses.count(200) <= 102
        assert statuses.count(429) == 140 - statuses.count(200)
