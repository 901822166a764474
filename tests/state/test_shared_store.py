"""`SharedStore` and the store fast paths: where keys land, what `take` answers, and what a
forked child binds."""

from __future__ import annotations

import os
from typing import Any

from socketify import Server, ratelimit
from socketify.state import sessions
from socketify.state.session_strategies import StoreStrategy
from socketify.state.sessions import Session, SessionOptions, new_id
from socketify.state.shared_store import SharedStore, local_state
from socketify.state.stores import TakeResult
from socketify.testing import TestClient
from workers.shared.kvstore import KeyValueStore
from workers.shared.state import LocalState
from workers.shared.table import SharedTable
from workers.shared.table_store import TableStore

SECRET = "s3cret-" * 6


def in_child(body: Any) -> int:
    """Run ``body()`` in a forked child; its exit status (0 when it returned True)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if body() else 3
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def test_a_store_without_a_namespace_answers_through_its_backend_and_a_child_rebinds() -> None:
    store = SharedStore()
    store.set("shared-store:k", b"parent", ttl=60)
    assert store.get("shared-store:k") == b"parent"
    assert vars(store)["get"].__self__ is local_state()  # no wrapper call of ours

    def child() -> bool:
        # The parent's private store is not the child's: nothing bound, nothing seen.
        unbound = "get" not in vars(store)
        return unbound and store.get("shared-store:k") is None

    assert in_child(child) == 0
    assert store.get("shared-store:k") == b"parent"


def test_every_backend_and_path_answers_take_with_a_take_result() -> None:
    table_store = TableStore(SharedTable(groups=(1, 1, 1), stripes=1), LocalState())
    stores: list[Any] = [SharedStore(), SharedStore("ns:"), LocalState(), table_store]
    for store in stores:
        for key in ("take-result", "k" * 230):  # a fast path, and one too long for it
            first = store.take(key, 2, 0.0)
            second = store.take(key, 2, 0.0)
            assert type(first) is TakeResult and type(second) is TakeResult
            assert (first.allowed, first.remaining) == (True, 1.0)
            assert (second.allowed, second.remaining, second.reset_seconds) == (
                True,
                0.0,
                float("inf"),
            )
            assert store.take(key, 2, 0.0).allowed is False


def test_a_namespaced_shared_store_keeps_sessions_and_buckets_under_its_namespace() -> None:
    backend = local_state()
    store = SharedStore("tenant-a:")
    server = Server()
    server.use(sessions.middleware(secret=SECRET, store=store))
    server.use(ratelimit.middleware(capacity=5, refill_per_second=0, store=store, prefix="rl:"))

    @server.get("/")
    def index(req, res):  # type: ignore[no-untyped-def]
        req.session["n"] = req.session.get("n", 0) + 1
        res.json(req.session["n"])

    client = TestClient(server)
    first = client.get("/")
    cookie = first.headers["Set-Cookie"].split(";")[0]
    second = client.get("/", headers={"Cookie": cookie})
    assert second.json() == 2 and second.headers["RateLimit-Remaining"] == "3"
    sid = cookie.split("=", 1)[1].split(".")[0]
    assert backend.get(f"tenant-a:sess:{sid}") == b'{"n":2}'
    assert store.get(f"sess:{sid}") == b'{"n":2}'
    assert backend.take("tenant-a:rl:127.0.0.1", 5, 0.0).remaining == 2.0


class FakeRequest:
    """What `StoreStrategy.load` reads: the Cookie lines, joined as `Request.header` does."""

    def __init__(self, *lines: str) -> None:
        self.lines = lines
        self.cookies: dict[str, str] = {}
        for line in lines:
            for pair in line.split(";"):
                name, _, value = pair.strip().partition("=")
                self.cookies[name] = value

    def header(self, name: str, default: str = "") -> str:
        return ", ".join(self.lines) if self.lines else default


def test_a_cookie_header_is_remembered_only_when_it_is_certainly_one_line() -> None:
    store = LocalState(KeyValueStore())
    strategy = StoreStrategy(SessionOptions(secret=SECRET, store=store), store, Session, new_id)
    sid = new_id()
    store.set(f"sess:{sid}", b'{"n":1}', 60)
    signed = strategy.sign(sid)

    one_line = FakeRequest(f"theme=dark; sid={signed}")
    assert strategy.load(one_line).id == sid  # type: ignore[arg-type]
    assert strategy.load(one_line).id == sid  # type: ignore[arg-type]  # from the memory
    assert list(strategy._headers.values()) == [(signed, sid)]

    two_lines = FakeRequest(f"sid={signed}", "theme=dark")  # joined with ", "
    assert strategy.load(two_lines).id == sid  # type: ignore[arg-type]
    assert len(strategy._headers) == 1  # not remembered: the same text could be one line
    # ...which, sent as one line, carries the cookie "<signed>, theme=dark": not valid.
    forged = FakeRequest(f"sid={signed}, theme=dark")
    assert forged.cookies["sid"] != signed
    assert strategy.load(forged).is_new  # type: ignore[arg-type]
