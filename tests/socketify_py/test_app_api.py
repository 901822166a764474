"""socketify.py's App API in-process (TestClient): each getter and writer, and the calls that
are not covered failing with what to use instead."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from socketify import App, AppListenOptions, AppOptions, CompressOptions, OpCode, Server
from socketify.testing import TestClient
from tests.support.pki import make_pki


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
    assert [where for where, _ in app.listen_at] == [
        AppListenOptions(port=0, host="127.0.0.1"),
        AppListenOptions(port=8080),
    ]
    with pytest.raises(TypeError):
        AppListenOptions(port="80")  # type: ignore[arg-type]
