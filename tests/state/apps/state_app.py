"""The app the live state tests run under `socketify run`: sessions, a global rate limit,
a shared cache and the bus, all on the default cross-worker store (or Redis, when the test
sets SOCKETIFY_STATE_URL)."""

from __future__ import annotations

import os

from socketify import Server
from socketify.middleware.ratelimit import middleware as ratelimit
from socketify.state import sessions
from socketify.state.cache import TtlCache
from socketify.state.shared_bus import default_bus
from socketify.state.shared_store import SharedStore

server = Server()
cache = TtlCache(default_ttl=60, shared=True)
session_mw = sessions.middleware(secret="test-secret-" * 3, ttl=600)
# A fresh namespace per test run: a Redis outlives the servers that used it.
NAMESPACE = os.environ.get("STATE_TEST_NAMESPACE", "")
limited = ratelimit(
    capacity=100, refill_per_second=100 / 60, store=SharedStore(NAMESPACE + "limit:")
)
received: dict[str, list[int]] = {}


def _record(payload: bytes) -> None:
    origin, _, seq = payload.decode().partition(":")
    received.setdefault(origin, []).append(int(seq))


@server.get("/ping")
def ping(req, res):
    res.json({"ok": True})


@server.get("/pid")
def pid(req, res):
    res.send(str(os.getpid()))


def count(req, res):
    n = req.session.get("n", 0) + 1
    req.session["n"] = n
    res.json({"n": n, "pid": os.getpid(), "id": req.session.id})


def peek(req, res):
    res.json({"n": req.session.get("n"), "pid": os.getpid(), "new": req.session.is_new})


def mark(req, res):
    """Count this client's requests under its own key of a session of some 600 bytes."""
    name = req.params["name"]
    req.session[name] = req.session.get(name, 0) + 1
    req.session["padding"] = "p" * 500  # past the small slots: the 1 KiB class
    res.json({"mine": req.session[name], "pid": os.getpid()})


def session_data(req, res):
    res.json(dict(req.session))


def limited_ping(req, res):
    res.json({"ok": True, "pid": os.getpid()})


server.get("/count", count).use(session_mw)
server.get("/peek", peek).use(session_mw)
server.get("/mark/:name", mark).use(session_mw)
server.get("/session-data", session_data).use(session_mw)
server.get("/limited", limited_ping).use(limited)
# No store given: the default must be global across workers too.
server.get("/limited-by-default", limited_ping).use(ratelimit(capacity=20, refill_per_second=0))


@server.get("/cache/set/:key/:value")
def cache_set(req, res):
    cache.set(req.params["key"], req.params["value"])
    res.json({"pid": os.getpid()})


@server.get("/cache/get/:key")
def cache_get(req, res):
    res.json({"value": cache.get(req.params["key"]), "pid": os.getpid(), "size": cache.size()})


@server.get("/bus/subscribe")
def bus_subscribe(req, res):
    if not received.get("_subscribed"):
        received["_subscribed"] = [1]
        default_bus().subscribe("test", _record)
    res.json({"pid": os.getpid()})


@server.get("/bus/publish/:n")
def bus_publish(req, res):
    bus = default_bus()
    for seq in range(int(req.params["n"])):
        bus.publish("test", f"{os.getpid()}:{seq}".encode())
    res.json({"pid": os.getpid()})


@server.get("/bus/received")
def bus_received(req, res):
    res.json({"pid": os.getpid(), "received": {k: v for k, v in received.items() if k[0] != "_"}})


@server.get("/store-kind")
def store_kind(req, res):
    import workers.shared.state

    res.json({"pid": os.getpid(), "kind": type(workers.shared.state.client()).__name__})
