"""socketify.py's App API in-process (TestClient): each getter and writer, and the calls that
are not covered failing with what to use instead."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from socketify import App, AppListenOptions, AppOptions, CompressOptions, OpCode, Server
from socketify.testing import TestClient
from socketify.testing.realtime import WebSocketClosed
from tests.support.pki import make_pki
from tests.support.wait import wait_for


def serve_one(handler: Any, path: str = "/", method: str = "get") -> TestClient:
    app = App()
    getattr(app, method)(path, handler)
    return TestClient(app)


def test_the_names_import_from_socketify_without_gevent() -> None:
    code = (
        "import sys\n"
        "from socketify import App, AppOptions, AppListenOptions, OpCode, SendStatus,"
        " CompressOptions\n"
        "print(App.__module__, 'gevent' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["socketify.socketify_py.app", "False"], out.stderr


def test_an_app_is_a_socketify_server() -> None:
    assert isinstance(App(), Server)
    assert OpCode.TEXT == 1 and OpCode.BINARY == 2 and CompressOptions.DISABLED == 0


def test_request_getters() -> None:
    seen: dict[str, Any] = {}

    def handler(res: Any, req: Any) -> None:
        seen.update(
            url=req.get_url(),
            full=req.get_full_url(),
            method=req.get_method(),
            header=req.get_header("x-one"),
            missing=req.get_header("x-none"),
            query=req.get_query("a"),
            queries=req.get_queries(),
            params=req.get_parameters(),
            second=req.get_parameter(1),
            beyond=req.get_parameter(5),
            cookie=req.get_cookie("sid"),
            ancient=req.is_ancient(),
        )
        fields: list[tuple[str, str]] = []
        req.for_each_header(lambda name, value: fields.append((name, value)))
        seen["fields"] = fields
        seen["headers"] = req.get_headers()
        res.end("ok")

    client = serve_one(handler, "/users/:id/posts/:post/*")
    client.get("/users/7/posts/9/rest/of?a=1&a=2&b=", headers={"X-One": "1", "Cookie": "sid=s"})
    assert seen["url"] == "/users/7/posts/9/rest/of"
    assert seen["full"] == "/users/7/posts/9/rest/of?a=1&a=2&b="
    assert (seen["method"], seen["header"], seen["missing"]) == ("GET", "1", None)
    assert (seen["query"], seen["queries"]) == ("1", {"a": ["1", "2"], "b": [""]})
    assert (seen["params"], seen["second"], seen["beyond"]) == (["7", "9"], "9", None)
    assert (seen["cookie"], seen["ancient"]) == ("s", False)
    assert ("x-one", "1") in seen["fields"] and seen["headers"]["x-one"] == "1"


def test_response_writers_chain() -> None:
    def handler(res: Any, req: Any) -> None:
        res.write_status("404 Not Found").write_header("X-A", 1).write_header("X-A", "2")
        res.set_cookie("sid", "v", {"path": "/", "httponly": True, "max_age": 60})
        res.end(b"gone")

    answer = serve_one(handler).get("/")
    assert (answer.status, answer.text) == (404, "gone")
    assert answer.headers.getall("x-a") == ["1", "2"]
    assert (
        "HttpOnly" in answer.headers["set-cookie"] and "Max-Age=60" in answer.headers["set-cookie"]
    )


def test_send_takes_status_headers_and_content_type() -> None:
    def handler(res: Any, req: Any) -> None:
        res.send("<b>hi</b>", content_type=b"text/html", status=202, headers=[("X-B", "b")])

    answer = serve_one(handler).get("/")
    assert (answer.status, answer.text, answer.headers["x-b"]) == (202, "<b>hi</b>", "b")
    assert answer.headers["content-type"].startswith("text/html")


def test_end_connection_closes_and_redirect_answers_302() -> None:
    answer = serve_one(lambda res, req: res.end("bye", True)).get("/")
    assert answer.headers["connection"] == "close"
    moved = serve_one(lambda res, req: res.redirect("/elsewhere")).get("/")
    assert (moved.status, moved.headers["location"]) == (302, "/elsewhere")


def test_a_handler_that_does_not_end_answers_an_empty_200() -> None:
    answer = serve_one(lambda res, req: None).get("/")
    assert (answer.status, answer.text) == (200, "")


def test_async_handlers_await_the_body_helpers() -> None:
    async def handler(res: Any, req: Any) -> None:
        form = await res.get_form_urlencoded()
        text = await res.get_text()
        await asyncio.sleep(0)
        res.end({"form": form, "text": text})

    answer = serve_one(handler, method="post").post("/", data={"a": "1", "b": "x y"})
    assert answer.json() == {"form": {"a": "1", "b": "x y"}, "text": "a=1&b=x+y"}


def test_run_async_runs_a_coroutine_to_its_end_from_a_plain_handler() -> None:
    async def compute() -> str:
        await asyncio.sleep(0)
        return "computed"

    answer = serve_one(lambda res, req: res.end(res.run_async(compute()))).get("/")
    assert answer.text == "computed"


def test_the_error_handler_gets_socketify_py_argument_order() -> None:
    app = App()

    def fails(res: Any, req: Any) -> None:
        raise KeyError("k")

    app.get("/", fails)
    app.set_error_handler(lambda error, res, req: res.write_status(503).end(type(error).__name__))
    answer = TestClient(app).get("/")
    assert (answer.status, answer.text) == (503, "KeyError")


def test_every_method_has_its_registration() -> None:
    app = App()
    for method in ("get", "post", "put", "patch", "delete", "options", "any"):
        getattr(app, method)(f"/{method}", lambda res, req: res.end(req.get_method()))
    client = TestClient(app)
    assert client.put("/put").text == "PUT" and client.delete("/delete").text == "DELETE"
    assert client.post("/any").text == "POST"


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda res, req: res.pause(), "res.pause"),
        (lambda res, req: res.resume(), "res.resume"),
        (lambda res, req: res.get_native_handle(), "res.get_native_handle"),
    ],
)
def test_calls_not_covered_fail_with_what_to_use_instead(call: Any, names: str) -> None:
    app = App()
    failures: list[BaseException] = []
    app.get("/", call)
    app.set_error_handler(lambda error, res, req: failures.append(error))
    TestClient(app).get("/")
    assert isinstance(failures[0], NotImplementedError)
    message = str(failures[0])
    assert names in message and "socketify-py.md" in message


def test_ws_behaviors_not_covered_are_refused_at_registration() -> None:
    with pytest.raises(NotImplementedError, match="max_lifetime"):
        App().ws("/ws", {"max_lifetime": 5})
    with pytest.raises(ValueError, match="unknown ws behavior"):
        App().ws("/ws", {"mesage": print})
    App().ws("/ws", {"max_lifetime": 0, "message": print})  # a falsy value asks for nothing


def test_ws_sends_and_topics_through_the_test_client() -> None:
    app = App()

    def on_message(ws: Any, message: Any, opcode: OpCode) -> None:
        ws.subscribe("t")
        reply = {"json": message, "subscribed": ws.is_subscribed("t")}
        ws.send({**reply, "from": ws.get_remote_address()}, OpCode.TEXT)

    app.ws("/ws", {"message": on_message})
    with TestClient(app).websocket("/ws") as ws:
        ws.send_text("hi")
        assert ws.receive_json() == {"json": "hi", "subscribed": True, "from": "127.0.0.1"}
        assert app.num_subscribers("t") == 1


def test_an_async_open_sees_the_remote_address() -> None:
    app = App()

    async def on_open(ws: Any) -> None:
        await asyncio.sleep(0)
        ws.send(ws.get_remote_address_bytes(), OpCode.BINARY)

    app.ws("/ws", {"open": on_open})
    with TestClient(app, remote_addr="10.1.2.3").websocket("/ws") as ws:
        assert ws.receive_bytes() == bytes([10, 1, 2, 3])


def test_app_options_become_tls_options(tmp_path: Any) -> None:
    pki = make_pki(tmp_path)
    app = App(AppOptions(key_file_name=pki.server.key, cert_file_name=pki.server.cert))
    assert app.settings.tls is not None and app.settings.tls.cert_file == pki.server.cert
    with pytest.raises(ValueError, match="both key_file_name and cert_file_name"):
        App(AppOptions(cert_file_name="c"))


def test_listen_records_and_run_needs_a_listen() -> None:
    app = App()
    with pytest.raises(RuntimeError, match=r"app\.listen"):
        app.run()
    app.listen(AppListenOptions(port=0, host="127.0.0.1")).listen({"port": 8080})
    assert [where for where, _ in app._listen_at] == [
        AppListenOptions(port=0, host="127.0.0.1"),
        AppListenOptions(port=8080),
    ]
    with pytest.raises(TypeError):
        AppListenOptions(port="80")  # type: ignore[arg-type]


def test_a_route_for_the_method_comes_before_any_and_a_declined_request_falls_through() -> None:
    app = App()

    def only_numbers(res: Any, req: Any) -> None:
        if req.get_parameter(0).isdigit():
            res.end(f"number {req.get_parameter(0)}")
        else:
            req.set_yield(True)

    app.any("/n/7", lambda res, req: res.end("any 7"))
    app.get("/n/:value", only_numbers)
    app.any("/*", lambda res, req: res.write_status(404).end("fallback"))
    client = TestClient(app)
    assert client.get("/n/7").text == "number 7"  # GET's route before the `any` one
    assert client.post("/n/7").text == "any 7"
    answer = client.get("/n/x")
    assert (answer.status, answer.text) == (404, "fallback")


def test_a_request_every_route_declined_answers_404() -> None:
    answer = serve_one(lambda res, req: req.set_yield(True), "/*").get("/anything")
    assert (answer.status, answer.text) == (404, "Not Found\n")


def test_the_decorator_router_prefixes_paths_and_runs_its_middleware() -> None:
    app = App()
    api = app.router("/api", lambda res, req, data: {"via": "api"})

    @api.get("/who")
    def who(res: Any, req: Any, data: Any = None) -> None:
        res.end(data)

    @app.router().post("/plain")
    def plain(res: Any, req: Any) -> None:
        res.end("plain")

    client = TestClient(app)
    assert client.get("/api/who").json() == {"via": "api"}
    assert client.post("/plain").text == "plain"


def test_extensions_add_methods_and_a_fresh_property_to_each_face() -> None:
    app = App()

    def extension(request: Any, response: Any, ws: Any) -> None:
        @request.method
        def token(self: Any) -> str:
            return str(self.get_header("token"))

        @response.method
        def shout(self: Any, text: str) -> Any:
            return self.end(text.upper())

        request.property("cart", [])

    app.register(extension)

    def handler(res: Any, req: Any) -> None:
        req.cart.append(req.token())
        res.shout(f"{req.cart}")

    app.get("/", handler)
    client = TestClient(app)
    assert client.get("/", headers={"token": "a"}).text == "['A']"
    assert client.get("/", headers={"token": "b"}).text == "['B']"  # not ['A', 'B']


def test_a_json_serializer_encodes_answers_and_decodes_bodies() -> None:
    class Tagged:
        @staticmethod
        def dumps(obj: Any) -> str:
            return json.dumps({"tagged": obj})

        @staticmethod
        def loads(data: str | bytes) -> Any:
            return {"read": json.loads(data)}

    app = App()
    app.json_serializer(Tagged)

    async def echo(res: Any, req: Any) -> None:
        res.end(await res.get_json())

    app.post("/", echo)
    answer = TestClient(app).post("/", json=[1])
    assert answer.json() == {"tagged": {"read": [1]}}
    with pytest.raises(TypeError, match="dumps"):
        app.json_serializer(object())


def test_try_end_refuses_past_the_limit_and_on_writable_offers_the_rest() -> None:
    body = bytes(range(256)) * 1000
    offsets: list[int] = []

    def offered(res: Any, req: Any) -> None:
        def offer(res: Any, offset: int) -> bool:
            offsets.append(offset)
            while True:
                ok, done = res.try_end(body[offset : offset + 10_000], len(body))
                if done or not ok:
                    return ok
                offset = res.get_write_offset()

        res.on_writable(offer)
        offer(res, 0)

    answer = serve_one(offered).get("/")
    assert answer.body == body
    assert len(offsets) > 2 and offsets == sorted(offsets)  # refused, then resumed


def test_send_chunk_resumes_once_each_piece_is_written() -> None:
    results: list[tuple[bool, bool]] = []

    async def pieces(res: Any, req: Any) -> None:
        for piece in (b"ab", b"cd", b"ef"):
            results.append(await res.send_chunk(piece, 6))

    assert serve_one(pieces).get("/").body == b"abcdef"
    assert results == [(True, False), (True, False), (True, True)]


def test_cork_send_and_the_websocket_extras() -> None:
    app = App()
    app.get("/", lambda res, req: res.grab_aborted_handler().cork_send({"a": 1}, status=201))

    def on_message(ws: Any, message: Any, opcode: OpCode) -> None:
        assert ws.clone() is ws and ws.get_user_data_uuid()
        ws.cork_end(4000, "bye")

    app.ws("/ws", {"message": on_message})
    client = TestClient(app)
    answer = client.get("/")
    assert (answer.status, answer.json()) == (201, {"a": 1})
    with client.websocket("/ws") as ws:
        ws.send_text("x")
        with pytest.raises(WebSocketClosed) as closed:
            ws.receive()
        assert (closed.value.code, closed.value.reason) == (4000, "bye")


def test_run_async_in_an_async_handler_schedules_a_task_the_answer_waits_for() -> None:
    async def later(res: Any) -> None:
        await asyncio.sleep(0.01)
        res.end("written by the task")

    async def handler(res: Any, req: Any) -> None:
        task = res.run_async(later(res))
        assert isinstance(task, asyncio.Task)

    assert serve_one(handler).get("/").text == "written by the task"


def test_the_subscription_behavior_hears_subscribe_unsubscribe_and_close() -> None:
    app = App()
    heard: list[tuple[str, int, int]] = []

    def on_message(ws: Any, message: Any, opcode: OpCode) -> None:
        (ws.subscribe if message.startswith("+") else ws.unsubscribe)(message[1:])
        ws.send("done", OpCode.TEXT)

    def subscription(ws: Any, topic: str, now: int, before: int) -> None:
        heard.append((topic, now, before))

    app.ws("/ws", {"message": on_message, "subscription": subscription})
    with TestClient(app).websocket("/ws") as ws:
        for command in ("+a", "+b", "-a"):
            ws.send_text(command)
            assert ws.receive_text() == "done"
    wait_for(lambda: len(heard) == 4, 10.0, message="the close to be heard")
    assert heard == [("a", 1, 0), ("b", 1, 0), ("a", 0, 1), ("b", 0, 1)]
