"""`async def` handlers, middleware and hooks are refused when registered, saying what to do."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from socketify import Server
from socketify.core.chain import hooked
from socketify.testing import TestClient


async def async_handler(req: Any, res: Any) -> None:
    res.send("never")


async def async_middleware(req: Any, res: Any, next: Any) -> None:
    next()


class AsyncCallable:
    async def __call__(self, req: Any, res: Any) -> None:
        res.send("never")


def assert_refused(excinfo: pytest.ExceptionInfo[TypeError], name: str) -> None:
    message = str(excinfo.value)
    assert "async def" in message
    assert name in message
    assert "plain `def`" in message


def test_async_route_handler_is_refused_at_registration() -> None:
    server = Server()
    with pytest.raises(TypeError) as excinfo:
        server.get("/", async_handler)
    assert_refused(excinfo, "async_handler")
    assert "'/'" in str(excinfo.value)


def test_async_handler_is_refused_through_the_decorator_and_in_groups() -> None:
    server = Server()
    with pytest.raises(TypeError):

        @server.post("/items")
        async def create(req: Any, res: Any) -> None: ...

    with pytest.raises(TypeError):
        server.group("/api").get("/x", async_handler)


@pytest.mark.parametrize("where", ["server", "group", "route"])
def test_async_middleware_is_refused_wherever_it_is_added(where: str) -> None:
    server = Server()
    target: Any = {
        "server": server,
        "group": server.group("/api"),
        "route": server.get("/x", lambda req, res: res.send("x")),
    }[where]
    with pytest.raises(TypeError) as excinfo:
        target.use(async_middleware)
    assert_refused(excinfo, "async_middleware")


def test_async_hooks_and_error_handlers_are_refused() -> None:
    async def before(req: Any, res: Any) -> bool:
        return True

    with pytest.raises(TypeError):
        hooked(before)
    with pytest.raises(TypeError):
        Server().on_error(async_handler)


def test_wrapped_async_callables_are_seen_through() -> None:
    server = Server()
    with pytest.raises(TypeError):
        server.get("/p", functools.partial(async_handler))
    with pytest.raises(TypeError) as excinfo:
        server.get("/c", AsyncCallable())
    assert "async def" in str(excinfo.value)


def test_plain_callables_still_register_and_answer() -> None:
    class Greeter:
        def __call__(self, req: Any, res: Any) -> None:
            res.send("hi")

    server = Server()
    server.get("/obj", Greeter())
    server.get("/partial", functools.partial(lambda word, req, res: res.send(word), "yo"))
    client = TestClient(server)
    assert client.get("/obj").text == "hi"
    assert client.get("/partial").text == "yo"


def test_a_non_callable_handler_is_refused() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        Server().get("/", "not a function")  # type: ignore[arg-type]


def test_async_websocket_callbacks_are_refused_at_registration() -> None:
    from socketify.protocol.websocket import Connection as Protocol
    from socketify.realtime.pulse import easy
    from socketify.realtime.pulse.channel import Channel

    async def on_message(ws: Any, data: Any, is_binary: bool) -> None: ...

    with pytest.raises(TypeError, match="message callback"):
        Server().ws("/chat", message=on_message)
    channel = Channel(Protocol())
    with pytest.raises(TypeError, match="on_text callback"):
        channel.on_text(async_handler)
    app = easy.App()
    with pytest.raises(TypeError, match="connection handler"):
        app.on("/events", async_handler)
