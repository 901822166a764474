"""TestClient: requests go through the real parser and serializer, in-process."""

from __future__ import annotations

import pytest

from socketify import HTTPError, Server
from socketify.middleware import body_limit
from socketify.testing import TestClient, TestResponse


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
    raw = client.exchange(b"GET / HTTP/1.1\nHost: x\n\n")
    assert raw.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Connection: close" in raw


def test_http_error_status_and_message() -> None:
    response = TestClient(make_app()).get("/teapot")
    assert response.status == 418
    assert response.text == "short and stout\n"


# -- bodies: read only when the app asks, as on a socket ------------------------------------


def body_app() -> Server:
    server = Server(max_body_size=4096)
    server.post("/ignore", lambda req, res: res.send("ignored"))
    server.post("/length", lambda req, res: res.send(str(len(req.body))))
    server.post("/limited", lambda req, res: res.send(str(len(req.body)))).use(body_limit(10))
    server.get("/host", lambda req, res: res.send(req.host))
    return server


def chunked_request(target: str, body: bytes, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return (
        f"POST {target} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode()
        + body
    )


def test_body_limit_refuses_from_content_length_with_connection_close() -> None:
    response = TestClient(body_app()).post("/limited", data=b"x" * 11)
    assert (response.status, response.headers["Connection"]) == (413, "close")


def test_body_limit_refuses_a_body_that_never_came() -> None:
    raw = b"POST /limited HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n"
    response = TestResponse(TestClient(body_app()).exchange(raw))
    assert (response.status, response.headers["Connection"]) == (413, "close")


def test_chunked_body_crossing_the_body_limit_is_413_with_close() -> None:
    raw = chunked_request("/limited", b"8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n")
    response = TestResponse(TestClient(body_app()).exchange(raw))
    assert (response.status, response.headers["Connection"]) == (413, "close")


def test_chunked_body_crossing_max_body_size_is_the_servers_413() -> None:
    raw = chunked_request("/length", b"800\r\n" + b"a" * 2048 + b"\r\n900\r\n")
    response = TestResponse(TestClient(body_app()).exchange(raw))
    assert (response.status, response.body) == (413, b"Payload Too Large: Body too large\n")
    assert response.headers["Connection"] == "close"


@pytest.mark.parametrize("target", ["/length", "/ignore"])
def test_a_framing_error_in_the_body_replaces_the_apps_answer(target: str) -> None:
    raw = chunked_request(target, b"3\nabc\r\n0\r\n\r\n")
    response = TestResponse(TestClient(body_app()).exchange(raw))
    assert (response.status, response.body) == (400, b"Bad Request: Bare LF in chunk framing\n")
    assert response.headers["Connection"] == "close"


def test_an_unread_body_keeps_the_connection() -> None:
    response = TestClient(body_app()).post("/ignore", data=b"x" * 100)
    assert (response.text, response.headers.get("Connection")) == ("ignored", None)


def test_an_unread_expect_100_continue_body_closes_the_connection() -> None:
    raw = b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
    response = TestResponse(TestClient(body_app()).exchange(raw))
    assert (response.text, response.headers["Connection"]) == ("ignored", "close")


def test_a_body_cut_short_is_a_400_when_read() -> None:
    raw = b"POST /length HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"
    response = TestResponse(TestClient(body_app()).exchange(raw))
    assert (response.status, response.headers["Connection"]) == (400, "close")


def test_a_request_kept_past_its_answer_cannot_read_the_body() -> None:
    kept = []
    server = Server()
    server.post("/keep", lambda req, res: (kept.append(req), res.send("ok")))
    TestClient(server).post("/keep", data=b"abc")
    with pytest.raises(RuntimeError, match="answered"):
        kept[0].body  # noqa: B018


def test_absolute_form_authority_is_the_host() -> None:
    raw = b"GET http://a:8080/host HTTP/1.1\r\nHost: b\r\n\r\n"
    assert TestResponse(TestClient(body_app()).exchange(raw)).text == "a:8080"


def trailers_app() -> Server:
    server = Server()

    @server.post("/echo-trailers")
    def echo_trailers(req, res):
        res.json({"body": req.text, "trailers": dict(req.trailers)})

    @server.get("/with-trailers")
    def with_trailers(req, res):
        def produce():
            yield "x" * 2000  # long enough for the compression middleware to take it
            res.set_trailer("X-Done", "yes")

        res.stream(produce())

    return server


def test_request_trailers_are_sent_after_a_chunked_body() -> None:
    client = TestClient(trailers_app())
    response = client.post("/echo-trailers", data="hi", trailers={"X-Sum": "2", "Host": "x"})
    assert response.json() == {"body": "hi", "trailers": {"x-sum": "2"}}


def test_response_trailers_are_exposed_like_headers() -> None:
    client = TestClient(trailers_app())
    response = client.get("/with-trailers")
    assert response.body == b"x" * 2000
    assert response.trailers["x-done"] == "yes"
    compressed = client.get("/with-trailers", headers={"Accept-Encoding": "gzip"})
    assert compressed.headers["Content-Encoding"] == "gzip"
    assert compressed.trailers["X-Done"] == "yes"
    plain = client.get("/with-trailers", version="HTTP/1.0")
    assert plain.body == b"x" * 2000 and dict(plain.trailers) == {}
