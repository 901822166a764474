"""TestClient: requests go through the real parser and serializer, in-process."""

from __future__ import annotations

from socketify import HTTPError, Server
from socketify.testing import TestClient


def make_app() -> Server:
    server = Server()

    @server.get("/hello/:name")
    def hello(req, res):
        res.send(f"Hello, {req.params['name']}!\n")

    @server.post("/echo")
    def echo(req, res):
        res.json({"body": req.json(), "type": req.header("Content-Type")})

    @server.get("/stream")
    def stream(req, res):
        res.stream(f"part{i};" for i in range(3))

    @server.get("/login")
    def login(req, res):
        res.set_cookie("sid", "abc", http_only=True)
        res.send("ok")

    @server.get("/whoami")
    def whoami(req, res):
        res.send(req.cookie("sid") or "nobody")

    @server.get("/logout")
    def logout(req, res):
        res.clear_cookie("sid")
        res.send("bye")

    @server.get("/teapot")
    def teapot(req, res):
        raise HTTPError(418, "short and stout")

    return server


def test_get_with_params_runs_the_handler() -> None:
    response = TestClient(make_app()).get("/hello/ada")
    assert response.status == 200
    assert response.text == "Hello, ada!\n"
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_json_body_round_trip() -> None:
    response = TestClient(make_app()).post("/echo", json={"a": [1, 2]})
    assert response.json() == {"body": {"a": [1, 2]}, "type": "application/json"}


def test_streamed_response_is_dechunked() -> None:
    response = TestClient(make_app()).get("/stream")
    assert response.headers["Transfer-Encoding"] == "chunked"
    assert response.body == b"part0;part1;part2;"


def test_head_has_headers_but_no_body() -> None:
    response = TestClient(make_app()).head("/hello/ada")
    assert response.headers["Content-Length"] == "12"
    assert response.body == b""


def test_cookies_persist_between_requests_and_clear() -> None:
    client = TestClient(make_app())
    assert client.get("/whoami").text == "nobody"
    client.get("/login")
    assert client.get("/whoami").text == "abc"
    client.get("/logout")
    assert client.get("/whoami").text == "nobody"


def test_parser_refusals_come_back_as_responses() -> None:
    client = TestClient(make_app())
    raw = client.exchange(b"get / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 501 Not Implemented\r\n")
    assert b"Connection: close" in raw


def test_http_error_status_and_message() -> None:
    response = TestClient(make_app()).get("/teapot")
    assert response.status == 418
    assert response.text == "short and stout\n"
