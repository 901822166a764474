"""`async def` handlers, middleware, hooks and error handlers run, in-process (TestClient).

The live tests (real server, real asyncio libraries, concurrency) are in
tests/integration/test_async_live.py; these pin the wrapping rules one by one.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import pytest

from socketify import Server
from socketify.core.chain import hooked
from socketify.core.coroutines import blocking, is_async
from socketify.testing import TestClient


async def async_handler(req: Any, res: Any) -> None:
    await asyncio.sleep(0)
    res.send("async answer")


class AsyncCallable:
    async def __call__(self, req: Any, res: Any) -> None:
        await asyncio.sleep(0)
        res.send("async object")


def test_async_handlers_run_through_the_decorator_groups_partials_and_objects() -> None:
    server = Server()

    @server.post("/items")
    async def create(req: Any, res: Any) -> None:
        await asyncio.sleep(0.001)
        res.status(201).json({"created": req.json()["name"]})

    server.group("/api").get("/x", async_handler)
    server.get("/partial", functools.partial(async_handler))
    server.get("/object", AsyncCallable())
    client = TestClient(server)
    assert client.post("/items", json={"name": "a"}).json() == {"created": "a"}
    assert client.post("/items", json={"name": "a"}).status == 201
    assert client.get("/api/x").text == "async answer"
    assert client.get("/partial").text == "async answer"
    assert client.get("/object").text == "async object"


def test_an_async_handler_that_returns_without_sending_gets_the_usual_empty_200() -> None:
    server = Server()

    async def quiet(req: Any, res: Any) -> None:
        await asyncio.sleep(0)
        res.set_header("X-Seen", "yes")

    server.get("/", quiet)
    answer = TestClient(server).get("/")
    assert (answer.status, answer.text, answer.headers["x-seen"]) == (200, "", "yes")


def test_async_exceptions_reach_the_error_answer_like_sync_ones() -> None:
    from socketify import HTTPError

    server = Server()

    async def missing(req: Any, res: Any) -> None:
        await asyncio.sleep(0)
        raise HTTPError(404, "no such thing")

    async def broken(req: Any, res: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    server.get("/missing", missing)
    server.get("/broken", broken)
    client = TestClient(server)
    assert (client.get("/missing").status, client.get("/missing").text) == (404, "no such thing\n")
    assert client.get("/broken").status == 500


def test_an_async_error_handler_answers_what_a_handler_raised() -> None:
    server = Server()

    @server.on_error
    async def on_error(req: Any, res: Any, exc: Exception) -> None:
        await asyncio.sleep(0)
        res.status(503).json({"error": type(exc).__name__})

    @server.get("/")
    def fails(req: Any, res: Any) -> None:
        raise KeyError("x")

    answer = TestClient(server).get("/")
    assert (answer.status, answer.json()) == (503, {"error": "KeyError"})


@pytest.mark.parametrize("where", ["server", "group", "route"])
def test_async_middleware_awaits_next_and_sees_the_answer_after_it(where: str) -> None:
    server = Server()
    api = server.group("/api")
    route = api.get("/x", lambda req, res: res.send("x"))

    async def timing(req: Any, res: Any, next: Any) -> None:
        await asyncio.sleep(0)
        res.set_header("X-Before", "1")
        await next()
        res.set_header("X-After", res.status_code)

    {"server": server, "group": api, "route": route}[where].use(timing)
    answer = TestClient(server).get("/api/x")
    assert (answer.text, answer.headers["x-before"], answer.headers["x-after"]) == ("x", "1", "200")


def test_async_middleware_catches_what_the_rest_of_the_chain_raised() -> None:
    server = Server()

    async def guard(req: Any, res: Any, next: Any) -> None:
        try:
            await next()
        except LookupError as exc:
            res.status(404).send(f"mapped {exc.args[0]}")

    server.use(guard)

    @server.get("/")
    def handler(req: Any, res: Any) -> None:
        raise LookupError("thing")

    answer = TestClient(server).get("/")
    assert (answer.status, answer.text) == (404, "mapped thing")


def test_async_middleware_that_answers_without_next_stops_the_chain() -> None:
    server = Server()
    reached: list[str] = []

    async def deny(req: Any, res: Any, next: Any) -> None:
        res.status(401).send("no")

    server.use(deny)
    server.get("/", lambda req, res: reached.append("handler"))
    assert TestClient(server).get("/").status == 401
    assert reached == []


def test_the_rest_of_the_chain_runs_in_the_request_greenlet_not_the_loop() -> None:
    """A blocking handler after an async middleware does not stall the event loop."""
    import gevent

    server = Server()
    where: dict[str, Any] = {}

    async def outer(req: Any, res: Any, next: Any) -> None:
        where["middleware"] = gevent.getcurrent()
        await next()

    @server.get("/")
    def handler(req: Any, res: Any) -> None:
        where["handler"] = gevent.getcurrent()
        time.sleep(0)
        res.send("ok")

    server.use(outer)
    assert TestClient(server).get("/").text == "ok"
    assert where["handler"] is not where["middleware"]


def test_async_before_and_after_hooks_run() -> None:
    seen: list[str] = []

    async def before(req: Any, res: Any) -> bool:
        await asyncio.sleep(0)
        seen.append("before")
        return True

    async def after(req: Any, res: Any, error: BaseException | None) -> None:
        seen.append(f"after {error}")

    server = Server()
    server.use(hooked(before, after))
    server.get("/", lambda req, res: res.send("x"))
    assert TestClient(server).get("/").text == "x"
    assert seen == ["before", "after None"]


def test_async_generator_functions_are_refused_with_what_to_do() -> None:
    async def chunks(req: Any, res: Any) -> Any:
        yield b"x"

    with pytest.raises(TypeError, match="async generator") as excinfo:
        Server().get("/", chunks)
    assert "res.stream" in str(excinfo.value)


def test_a_non_callable_handler_is_refused() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        Server().get("/", "not a function")  # type: ignore[arg-type]


def test_plain_callables_are_registered_as_they_are() -> None:
    def plain(req: Any, res: Any) -> None: ...

    assert blocking(plain, "handler") is plain
    assert not is_async(plain)
    assert is_async(AsyncCallable())
    assert is_async(functools.partial(async_handler))


def test_async_websocket_callbacks_are_accepted_at_registration() -> None:
    from socketify.protocol.websocket import Connection as Protocol
    from socketify.realtime.pulse import easy
    from socketify.realtime.pulse.channel import Channel

    async def on_message(ws: Any, data: Any, is_binary: bool) -> None: ...

    Server().ws("/chat", message=on_message, open=on_message, close=on_message)
    Channel(Protocol()).on_text(async_handler)
    easy.App().on("/events", async_handler)


def test_calling_an_async_handler_outside_a_server_says_how_to_serve_it() -> None:
    from socketify.core import coroutines

    wrapped = blocking(async_handler, "handler")
    installed = coroutines.runner()
    coroutines.install_runner(None)  # type: ignore[arg-type]
    try:
        with pytest.raises(RuntimeError, match="outside a Socketify server"):
            wrapped(None, None)
    finally:
        coroutines.install_runner(installed)


def test_async_pulse_easy_handlers_run_in_order() -> None:
    from socketify.realtime.pulse import easy

    server = Server()
    events = easy.App()

    @events.on("/events")
    async def connected(conn: Any) -> None:
        await asyncio.sleep(0)

        async def add(conn: Any, data: Any) -> None:
            await asyncio.sleep(0.001 * (3 - data["n"]))  # later messages sleep less
            conn.emit("added", data["n"] + 1)

        conn.on("add", add)

    events.bind(server)
    with TestClient(server).websocket("/events") as ws:
        for n in range(3):
            ws.send_json({"type": "add", "data": {"n": n}})
        replies = [ws.receive_json() for _ in range(3)]
    assert [reply["data"] for reply in replies] == [1, 2, 3]


def test_plain_handlers_can_run_their_own_event_loop_once_async_ones_have_run() -> None:
    # The worker's loop waits in another greenlet of the same thread; it must not look like
    # the running loop to blocking code (asyncio.run() refuses to start inside one).
    server = Server()
    server.get("/async", async_handler)

    async def answer() -> str:
        await asyncio.sleep(0)
        return "own loop"

    @server.get("/blocking")
    def blocking_handler(req: Any, res: Any) -> None:
        res.send(asyncio.run(answer()))

    client = TestClient(server)
    assert client.get("/async").text == "async answer"
    assert client.get("/blocking").text == "own loop"
    assert client.get("/async").text == "async answer"
