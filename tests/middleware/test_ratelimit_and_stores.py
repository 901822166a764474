"""Rate limiting, the Store protocol with MemoryStore, and proxy trust."""

from __future__ import annotations

import math

import pytest

from socketify import Server, ratelimit
from socketify.middleware import client_ip
from socketify.state.stores import MemoryStore, Store, TakeResult
from socketify.testing import TestClient
from tests.support.handle import build_request


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def app(*middleware: object, trust_proxy: bool = False) -> TestClient:
    server = Server(trust_proxy=trust_proxy)
    for mw in middleware:
        server.use(mw)  # type: ignore[arg-type]

    @server.get("/")
    def index(req, res):
        res.send("ok")

    return TestClient(server)


# -- the middleware -------------------------------------------------------------------------


def test_headers_count_down_then_429_with_retry_after() -> None:
    clock = Clock()
    client = app(ratelimit.middleware(capacity=5, refill_per_second=0.5, store=MemoryStore(clock)))
    remaining = []
    for _ in range(5):
        r = client.get("/")
        assert r.status == 200 and r.headers["RateLimit-Limit"] == "5"
        assert "RateLimit-Reset" not in r.headers and "Retry-After" not in r.headers
        remaining.append(r.headers["RateLimit-Remaining"])
    assert remaining == ["4", "3", "2", "1", "0"]
    blocked = client.get("/")
    assert blocked.status == 429 and blocked.body == b"Too Many Requests\n"
    assert blocked.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert blocked.headers["RateLimit-Remaining"] == "0"
    assert blocked.headers["Retry-After"] == "2" == blocked.headers["RateLimit-Reset"]
    clock.now += 2.0
    assert client.get("/").status == 200


def test_fractional_buckets_are_floored_in_the_headers() -> None:
    clock = Clock()
    client = app(
        ratelimit.middleware(capacity=2.5, refill_per_second=0.25, store=MemoryStore(clock))
    )
    first = client.get("/").headers
    assert first["RateLimit-Limit"] == "2" and first["RateLimit-Remaining"] == "1"  # 1.5 left
    assert client.get("/").headers["RateLimit-Remaining"] == "0"  # 0.5 left
    blocked = client.get("/")
    assert blocked.status == 429 and blocked.headers["RateLimit-Remaining"] == "0"
    assert blocked.headers["Retry-After"] == "2"  # 0.5 token short at 0.25/s


def test_refill_is_capped_at_capacity() -> None:
    clock = Clock()
    client = app(ratelimit.middleware(capacity=2, refill_per_second=10, store=MemoryStore(clock)))
    client.get("/")
    clock.now += 3600
    assert client.get("/").headers["RateLimit-Remaining"] == "1"


def test_no_refill_means_retry_after_3600() -> None:
    client = app(ratelimit.middleware(capacity=1, refill_per_second=0))
    client.get("/")
    assert client.get("/").headers["Retry-After"] == "3600"


def test_retry_after_is_sent_without_standard_headers() -> None:
    client = app(ratelimit.middleware(capacity=1, refill_per_second=1, standard_headers=False))
    assert "RateLimit-Limit" not in client.get("/").headers
    blocked = client.get("/")
    assert blocked.status == 429 and blocked.headers["Retry-After"] == "1"
    assert "RateLimit-Reset" not in blocked.headers


def test_custom_message_and_empty_key_exempts() -> None:
    keyed = app(
        ratelimit.middleware(
            capacity=1,
            refill_per_second=0,
            key=lambda req: req.header("X-Api-Key") or None,
            message="slow down\n",
        )
    )
    for _ in range(3):
        assert keyed.get("/").status == 200  # no key: exempt, no headers
    assert "RateLimit-Limit" not in keyed.get("/").headers
    assert keyed.get("/", headers={"X-Api-Key": "a"}).status == 200
    assert keyed.get("/", headers={"X-Api-Key": "a"}).body == b"slow down\n"
    assert keyed.get("/", headers={"X-Api-Key": "b"}).status == 200


def test_buckets_are_per_client_address() -> None:
    limiter = ratelimit.middleware(capacity=1, refill_per_second=0)
    server = Server()
    server.use(limiter)
    server.get("/", lambda req, res: res.send("ok"))
    assert TestClient(server, remote_addr="10.0.0.1").get("/").status == 200
    assert TestClient(server, remote_addr="10.0.0.2").get("/").status == 200
    assert TestClient(server, remote_addr="10.0.0.1").get("/").status == 429


def test_forwarded_for_is_ignored_unless_trusted() -> None:
    untrusted = app(ratelimit.middleware(capacity=1, refill_per_second=0))
    untrusted.get("/", headers={"X-Forwarded-For": "1.1.1.1"})
    assert untrusted.get("/", headers={"X-Forwarded-For": "2.2.2.2"}).status == 429
    trusted = app(ratelimit.middleware(capacity=1, refill_per_second=0, trust_proxy=1))
    trusted.get("/", headers={"X-Forwarded-For": "1.1.1.1"})
    assert trusted.get("/", headers={"X-Forwarded-For": "2.2.2.2"}).status == 200
    assert trusted.get("/", headers={"X-Forwarded-For": "2.2.2.2"}).status == 429


def test_limiters_share_a_store_through_prefixes() -> None:
    store = MemoryStore()
    first = app(ratelimit.middleware(capacity=1, refill_per_second=0, store=store, prefix="a:"))
    second = app(
        ratelimit.middleware(capacity=1, refill_per_second=0, store=store, prefix="other:")
    )
    assert first.get("/").status == 200 and second.get("/").status == 200
    shared = app(ratelimit.middleware(capacity=1, refill_per_second=0, store=store, prefix="a:"))
    assert shared.get("/").status == 429  # same prefix, same bucket: global quota


def test_limiters_without_a_prefix_keep_their_own_buckets_in_one_store() -> None:
    store = MemoryStore()
    first = app(ratelimit.middleware(capacity=1, refill_per_second=0, store=store))
    second = app(ratelimit.middleware(capacity=1, refill_per_second=0, store=store))
    assert first.get("/").status == 200 and second.get("/").status == 200
    assert first.get("/").status == 429 and second.get("/").status == 429


def test_invalid_options_are_refused() -> None:
    with pytest.raises(ValueError):
        ratelimit.middleware(capacity=0)
    with pytest.raises(ValueError):
        ratelimit.middleware(refill_per_second=-1)


# -- MemoryStore against the Store contract -------------------------------------------------


def test_memory_store_is_a_store() -> None:
    assert isinstance(MemoryStore(), Store)


def test_get_set_delete_with_ttl() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    assert store.get("k") is None
    store.set("k", b"v", ttl=10)
    assert store.get("k") == b"v"
    clock.now += 10
    assert store.get("k") is None
    store.set("k", b"v")
    assert store.delete("k") is True and store.delete("k") is False
    with pytest.raises(TypeError):
        store.set("k", "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.set("k", b"v", ttl=0)


def test_incr_creates_counts_and_keeps_the_first_ttl() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    assert store.incr("hits", ttl=60) == 1
    clock.now += 30
    assert store.incr("hits", 5, ttl=60) == 6
    assert store.get("hits") == b"6"
    clock.now += 30
    assert store.incr("hits") == 1  # the window expired at 60 s after creation
    store.set("text", b"abc")
    with pytest.raises(ValueError):
        store.incr("text")


def test_take_reports_remaining_and_reset() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    assert store.take("b", 2, 1.0) == TakeResult(True, 1.0, 0.0)
    assert store.take("b", 2, 1.0) == TakeResult(True, 0.0, 1.0)
    denied = store.take("b", 2, 1.0)
    assert denied.allowed is False and denied.reset_seconds == pytest.approx(1.0)
    clock.now += 0.5
    assert store.take("b", 2, 1.0).reset_seconds == pytest.approx(0.5)
    assert math.isinf(store.take("never", 1, 0).reset_seconds)


def test_take_accepts_the_callers_clock() -> None:
    store = MemoryStore()
    store.take("b", 1, 1.0, now=5.0)
    assert store.take("b", 1, 1.0, now=5.5).allowed is False
    assert store.take("b", 1, 1.0, now=6.0).allowed is True


def test_full_buckets_and_expired_keys_are_swept() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    for i in range(100):
        store.take(f"ip{i}", 10, 1.0)
        store.set(f"k{i}", b"x", ttl=1)
    store.take("never", 1, 0)  # never refills: must be kept
    assert len(store) == 201
    clock.now += 120  # past the sweep period; every bucket refilled long ago
    store.set("trigger", b"x")
    assert len(store) == 2  # "trigger" and "never"


# -- proxy trust ----------------------------------------------------------------------------


def req_from(peer: str, **headers: str):
    return build_request(headers=list(headers.items()), remote_addr=peer)


def test_client_ip_without_trust_is_the_peer() -> None:
    assert client_ip(req_from("10.0.0.5", **{"X-Forwarded-For": "1.2.3.4"})) == "10.0.0.5"


def test_client_ip_trust_all_takes_the_leftmost() -> None:
    req = req_from("10.0.0.5", **{"X-Forwarded-For": "1.2.3.4, 10.0.0.9"})
    assert client_ip(req, True) == "1.2.3.4"


def test_client_ip_by_hop_count_is_not_spoofable() -> None:
    # The client forged "6.6.6.6"; our one proxy appended the real address.
    req = req_from("10.0.0.5", **{"X-Forwarded-For": "6.6.6.6, 1.2.3.4"})
    assert client_ip(req, 1) == "1.2.3.4"
    assert client_ip(req, 2) == "6.6.6.6"
    assert client_ip(req, 9) == "6.6.6.6"  # more hops than addresses: the leftmost
    assert client_ip(req, 0) == "10.0.0.5"


def test_client_ip_by_trusted_networks() -> None:
    req = req_from("10.0.0.5", **{"X-Forwarded-For": "6.6.6.6, 1.2.3.4, 10.1.1.1"})
    assert client_ip(req, ["10.0.0.0/8"]) == "1.2.3.4"
    assert client_ip(req_from("8.8.8.8", **{"X-Forwarded-For": "1.2.3.4"}), ["10.0.0.0/8"]) == (
        "8.8.8.8"
    )  # the peer itself is not a trusted proxy
    with pytest.raises(ValueError):
        client_ip(req, ["not-a-network"])


def test_client_ip_reads_rfc7239_forwarded() -> None:
    req = req_from(
        "10.0.0.5", Forwarded='for="[2001:db8::1]:4711";proto=https, for=198.51.100.7:80'
    )
    assert client_ip(req, 1) == "198.51.100.7"
    assert client_ip(req, True) == "2001:db8::1"
