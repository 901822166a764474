"""A Redis state backend that stops answering, dies and comes back, under the real
`socketify run --workers 2`: every request is answered (503 with Retry-After, or served)
within 2 s, each worker logs the outage once and its end once, never a traceback, and
sessions, rate limits and the bus work again once Redis is back."""

from __future__ import annotations

import contextlib
import http.client
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from load_tests.redis_server import PrivateRedis
from socketify import Server
from socketify.middleware.ratelimit import middleware as ratelimit
from socketify.state import sessions
from socketify.state.redis import RedisStore
from socketify.testing import TestClient
from tests.state.test_live_workers import fetch, subscribe_everywhere
from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(120)
BAR = 2.0  # seconds within which every request must be answered, Redis or not
OUTAGE = re.compile(r"\[(\d+)\] \[ERROR\] socketify\.state: Redis .* is unreachable .*"
                    r"answering 503 until it returns")  # fmt: skip
RECOVERED = re.compile(r"\[(\d+)\] \[WARNING\] socketify\.state: Redis .* recovered after")


@dataclass(frozen=True)
class Answer:
    path: str
    status: int
    retry_after: str | None
    elapsed: float
    body: bytes


def ask(server: ServerProcess, path: str, cookie: str = "") -> Answer:
    """One request on a new connection, timed from connect to the last body byte."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        headers = {"Connection": "close", **({"Cookie": cookie} if cookie else {})}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    elapsed = time.monotonic() - started
    return Answer(path, response.status, response.getheader("Retry-After"), elapsed, body)


def state_app(serve: Launcher, redis: PrivateRedis) -> ServerProcess:
    env = {"SOCKETIFY_STATE_URL": redis.url, "STATE_TEST_NAMESPACE": f"{uuid.uuid4().hex}:"}
    return serve("tests.state.apps.state_app:server", workers=2, env=env)


def hammer(server: ServerProcess, paths: list[str], cookie: str, seconds: float) -> list[Answer]:
    """Four clients asking for `paths` in turn for `seconds`."""
    answers: list[Answer] = []
    errors: list[BaseException] = []
    deadline = time.monotonic() + seconds

    def client() -> None:
        try:
            while time.monotonic() < deadline:
                for path in paths:
                    answers.append(ask(server, path, cookie))
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return answers


def assert_degraded(answers: list[Answer], served: set[str]) -> None:
    """Every answer within the bar; 503 with Retry-After unless the path is in `served`."""
    slow = [a for a in answers if a.elapsed >= BAR]
    assert not slow, slow[:5]
    for answer in answers:
        if answer.path in served:
            assert answer.status == 200, answer
        else:
            assert answer.status == 503 and answer.retry_after == "1", answer
            assert b"shared state is unreachable" in answer.body


def lines(server: ServerProcess, pattern: re.Pattern[str]) -> list[int]:
    """The pids of the log lines matching `pattern`."""
    return [int(m.group(1)) for m in pattern.finditer(server.output())]


def wait_for_recovery(server: ServerProcess, cookie: str) -> int:
    """Ask until the session is served again, then until every worker that logged the
    outage has logged its end (each finds out on its own next request); returns the counter
    of the first /count served."""
    deadline = time.monotonic() + 20
    n = 0
    while time.monotonic() < deadline:
        status, data, _ = fetch(server, "/peek" if n else "/count", cookie)
        if status == 200:
            n = n or data["n"]
            if sorted(lines(server, RECOVERED)) == sorted(lines(server, OUTAGE)):
                return n
        time.sleep(0.05)
    raise AssertionError(f"no recovery:\n{server.output()[-3000:]}")


def test_a_stopped_redis_is_answered_503_within_2_s_logged_once_and_recovered(
    serve: Launcher, private_redis: PrivateRedis
) -> None:
    with state_app(serve, private_redis) as server:
        cookie = ""
        for n in (1, 2, 3):
            status, data, cookie = fetch(server, "/count", cookie)
            assert status == 200 and data["n"] == n
        private_redis.pause()
        answers = hammer(server, ["/count", "/limited", "/bus/publish/3", "/ping"], cookie, 3.0)
        # Publishing drops the message rather than failing; /ping needs no state.
        assert_degraded(answers, served={"/bus/publish/3", "/ping"})
        outage = lines(server, OUTAGE)
        assert 1 <= len(outage) <= 2 and len(set(outage)) == len(outage)  # once per worker
        private_redis.resume()
        assert wait_for_recovery(server, cookie) == 4  # the session outlived the stop
        assert fetch(server, "/limited")[0] == 200
        log = server.output()
        assert "Traceback" not in log
        assert len(lines(server, RECOVERED)) == len(outage)


def test_a_killed_redis_is_answered_503_without_tracebacks_and_a_restart_brings_all_back(
    serve: Launcher, private_redis: PrivateRedis
) -> None:
    with state_app(serve, private_redis) as server:
        workers = subscribe_everywhere(server, 2)
        _, _, cookie = fetch(server, "/count")
        private_redis.kill()
        answers = hammer(server, ["/count", "/limited", "/bus/publish/3"], cookie, 1.5)
        assert_degraded(answers, served={"/bus/publish/3"})
        outage = lines(server, OUTAGE)
        assert 1 <= len(outage) <= 2 and len(set(outage)) == len(outage)
        private_redis.start()  # the same port, empty
        assert wait_for_recovery(server, cookie) == 1  # a new session: the old one died
        # Each worker's bus subscription is back: a message reaches both.
        deadline = time.monotonic() + 20
        heard: set[int] = set()
        while heard != workers and time.monotonic() < deadline:
            fetch(server, "/bus/publish/1")
            _, data, _ = fetch(server, "/bus/received")
            if data["received"]:
                heard.add(data["pid"])
        assert heard == workers
        assert "Traceback" not in server.output()
        assert sorted(lines(server, RECOVERED)) == sorted(lines(server, OUTAGE))


def test_outages_answer_503_to_sessions_and_limits_and_fail_open_lets_a_limit_pass() -> None:
    pytest.importorskip("redis")
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    server = Server()

    def handler(req, res):
        req.session["seen"] = True
        res.send("ok")

    server.get("/limited", lambda req, res: res.send("ok")).use(ratelimit(store=store))
    server.get("/open", lambda req, res: res.send("ok")).use(ratelimit(store=store, fail_open=True))
    server.get("/session", handler).use(sessions.middleware(secret="s" * 32, store=store))
    client = TestClient(server)
    for path in ("/limited", "/session", "/limited"):
        response = client.get(path)
        assert response.status_code == 503 and response.headers["Retry-After"] == "1"
        assert orjson.dumps(response.text).find(b"127.0.0.1") == -1  # no detail to the client
    response = client.get("/open")
    assert response.status_code == 200 and "RateLimit-Limit" not in response.headers


def test_hub_broadcasts_while_redis_is_gone_keep_channels_open_and_rooms_come_back(
    serve: Launcher, private_redis: PrivateRedis
) -> None:
    from websockets.sync.client import connect

    env = {"SOCKETIFY_STATE_URL": private_redis.url}
    room = uuid.uuid4().hex
    with (
        serve("tests.realtime.realtime_app:server", workers=2, env=env) as server,
        contextlib.ExitStack() as stack,
    ):
        members = []
        for _ in range(4):  # the kernel spreads them over the workers
            ws = stack.enter_context(
                connect(f"ws://127.0.0.1:{server.port}/pulse/join?room={room}", open_timeout=5)
            )
            assert str(ws.recv(timeout=5)).startswith("pid:")
            members.append(ws)
        private_redis.kill()
        started = time.monotonic()
        members[0].send("lost while Redis is gone")
        members[0].send("size")  # the channel is still open and its worker still serves it
        assert next_starting(members[0], "size:").count(":") == 2
        assert time.monotonic() - started < BAR
        private_redis.start()
        deadline = time.monotonic() + 20
        heard = False
        while not heard and time.monotonic() < deadline:
            members[0].send("back")
            heard = all(next_starting(ws, "back", 1.0) == "back" for ws in members)
        assert heard, server.output()[-3000:]
        assert "Traceback" not in server.output()


def next_starting(ws: Any, prefix: str, timeout: float = 5.0) -> str:
    """The next message of `ws` that starts with `prefix` ("" if none within `timeout`)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = str(ws.recv(timeout=left))
        except TimeoutError:
            return ""
        if message.startswith(prefix):
            return message
    return ""
