"""How a WSGI app's answer becomes the response: `start_response` and its `exc_info` rules,
`write()`, the iterable's kinds and its `close()`, Content-Length and HEAD, and
`wsgi.file_wrapper`. Fake WSGI apps, the real request path through `TestClient`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from socketify import Server
from socketify.core.response import Response
from socketify.testing import TestClient
from socketify.wsgi.answer import Answer, parse_status

BIG = 64 * 1024


def client_for(app: Any) -> TestClient:
    server = Server(compression=False)
    server.mount("/", app)
    return TestClient(server)


class Body:
    """An iterable body that records whether (and how often) it was closed."""

    def __init__(self, chunks: list[bytes], fail_at: int | None = None) -> None:
        self.chunks = chunks
        self.fail_at = fail_at
        self.closed = 0
        self.produced = 0

    def __iter__(self) -> Iterator[bytes]:
        for index, chunk in enumerate(self.chunks):
            if index == self.fail_at:
                raise RuntimeError("the body failed")
            self.produced += 1
            yield chunk

    def close(self) -> None:
        self.closed += 1


def test_a_list_body_is_one_buffered_answer_with_the_apps_headers() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("201 Created", [("Content-Type", "text/csv"), ("X-A", "1"), ("X-A", "2")])
        return [b"a,b\n", b"1,2\n"]

    response = client_for(app).get("/")
    assert response.status == 201
    assert response.headers["Content-Type"] == "text/csv"
    assert response.headers.getall("X-A") == ["1", "2"]
    assert response.headers["Content-Length"] == "8"
    assert response.body == b"a,b\n1,2\n"


@pytest.mark.parametrize("status", ["200", "200OK", "2000 OK", b"200 OK", 200, "abc OK", "099 X"])
def test_a_malformed_status_is_a_500(status: Any) -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response(status, [])
        return [b""]

    assert client_for(app).get("/").status == 500
    with pytest.raises((TypeError, ValueError)):
        parse_status(status)


@pytest.mark.parametrize(
    "headers", [[("X", 1)], [("X",)], [["X", "1"]], (("X", "1"),), [("X", "a\r\nInjected: 1")]]
)
def test_malformed_headers_are_a_500(headers: Any) -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", headers)
        return [b"body"]

    response = client_for(app).get("/")
    assert response.status == 500
    assert "Injected" not in response.headers


def test_a_header_list_the_app_changes_between_answers_is_read_again() -> None:
    # Each distinct header list is checked once and its plan kept: the plan follows the
    # list's contents, not the list object an app keeps reusing.
    headers = [("Content-Type", "text/plain"), ("X-Answer", "1")]

    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", headers)
        return [b"body"]

    client = client_for(app)
    assert client.get("/").headers["X-Answer"] == "1"
    headers[1] = ("X-Answer", "2")
    second = client.get("/")
    assert (second.headers["X-Answer"], second.headers["Content-Type"]) == ("2", "text/plain")
    headers.append(("X-Bad", 3))  # type: ignore[arg-type]  # what PEP 3333 forbids
    assert client.get("/").status == 500


def test_hop_by_hop_headers_of_the_app_are_dropped() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Transfer-Encoding", "chunked"), ("Keep-Alive", "5")])
        return [b"plain"]

    response = client_for(app).get("/")
    assert "Keep-Alive" not in response.headers
    assert response.headers["Content-Length"] == "5"
    assert response.body == b"plain"


def test_start_response_twice_without_exc_info_is_an_error() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        start_response("404 Not Found", [])
        return [b""]

    assert client_for(app).get("/").status == 500


def test_exc_info_before_the_headers_went_out_replaces_them() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("X-Page", "good")])
        try:
            raise KeyError("lost")
        except KeyError:
            start_response("503 Service Unavailable", [("X-Page", "error")], sys.exc_info())
        return [b"sorry"]

    response = client_for(app).get("/")
    assert (response.status, response.headers["X-Page"], response.body) == (503, "error", b"sorry")


def test_exc_info_after_the_headers_went_out_raises_it_again() -> None:
    res = Response()
    answer = Answer(res)
    write = answer.start_response("200 OK", [])
    write(b"first")
    try:
        raise KeyError("late")
    except KeyError:
        with pytest.raises(KeyError, match="late"):
            answer.start_response("500 Internal Server Error", [], sys.exc_info())


def test_write_data_goes_out_before_the_iterable() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        write = start_response("200 OK", [])
        write(b"one,")
        write(b"two,")
        return [b"three"]

    assert client_for(app).get("/").body == b"one,two,three"


def test_write_before_start_response_and_str_chunks_are_errors() -> None:
    answer = Answer(Response())
    with pytest.raises(RuntimeError):
        answer.write(b"x")
    write = answer.start_response("200 OK", [])
    with pytest.raises(TypeError):
        write("text")  # type: ignore[arg-type]

    def str_body(environ: Any, start_response: Any) -> list[Any]:
        start_response("200 OK", [])
        return ["text"]

    assert client_for(str_body).get("/").status == 500


def test_an_app_that_never_calls_start_response_is_a_500() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        return [b"body"]

    assert client_for(app).get("/").status == 500


def test_start_response_may_come_with_the_first_chunk_of_a_generator() -> None:
    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        yield b"late "
        yield b"start"

    response = client_for(app).get("/")
    assert (response.status, response.body) == (200, b"late start")


def test_a_generator_without_length_is_streamed_chunked() -> None:
    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield b"x" * BIG
        yield b"tail"

    response = client_for(app).get("/")
    assert response.headers["Transfer-Encoding"] == "chunked"
    assert response.body == b"x" * BIG + b"tail"


def test_a_first_chunk_that_is_the_whole_content_length_is_buffered() -> None:
    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Length", "6")])
        yield b"abcdef"
        raise AssertionError("never asked for more than the Content-Length")

    response = client_for(app).get("/")
    assert (response.headers["Content-Length"], response.body) == ("6", b"abcdef")


def test_a_sized_body_in_several_chunks_streams_with_its_length() -> None:
    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Length", "6")])
        yield b"abc"
        yield b"def"

    response = client_for(app).get("/")
    assert (response.headers["Content-Length"], response.body) == ("6", b"abcdef")
    assert "Transfer-Encoding" not in response.headers


def test_a_body_shorter_than_its_content_length_fails_the_stream() -> None:
    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Length", "10")])
        yield b"abc"
        yield b"def"

    with pytest.raises(ValueError, match="4 bytes short"):
        client_for(app).get("/")  # the live server cuts the connection instead


def test_a_long_body_with_a_length_streams_with_that_length() -> None:
    piece = b"y" * 50_000
    body = Body([piece] * 4)

    def app(environ: Any, start_response: Any) -> Body:
        start_response("200 OK", [("Content-Length", str(len(piece) * 4))])
        return body

    response = client_for(app).get("/")
    assert response.headers["Content-Length"] == "200000"
    assert "Transfer-Encoding" not in response.headers
    assert response.body == piece * 4
    assert body.closed == 1


def test_no_more_than_the_content_length_is_sent() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Length", "3")])
        return [b"abcdef"]

    response = client_for(app).get("/")
    assert (response.headers["Content-Length"], response.body) == ("3", b"abc")


def test_head_keeps_the_apps_content_length_and_sends_no_body() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Length", "1234"), ("Content-Type", "text/plain")])
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [b"z" * 1234]

    response = client_for(app).head("/")
    assert (response.status, response.headers["Content-Length"], response.body) == (
        200,
        "1234",
        b"",
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: Body([b"a", b"b"]),
        lambda: Body([b"a"] * 3, fail_at=1),
        lambda: Body([b"x" * BIG, b"y", b"z"], fail_at=2),
    ],
    ids=["answered", "failed-in-handler", "failed-while-streaming"],
)
def test_the_iterable_is_closed_exactly_once_on_every_path(make: Any) -> None:
    body = make()

    def app(environ: Any, start_response: Any) -> Body:
        start_response("200 OK", [])
        return body

    with contextlib.suppress(RuntimeError):  # TestClient raises what a stream raised
        client_for(app).get("/")
    assert body.closed == 1


def test_a_head_request_closes_the_iterable_it_never_sends() -> None:
    body = Body([b"x" * BIG, b"more"])

    def app(environ: Any, start_response: Any) -> Body:
        start_response("200 OK", [])
        return body

    assert client_for(app).head("/").body == b""
    assert body.closed == 1


def test_a_failure_in_the_first_chunk_is_a_500_page() -> None:
    def app(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("X-Kept", "no")])
        raise RuntimeError("boom")
        yield b""  # a generator

    response = client_for(app).get("/")
    assert response.status == 500


def test_file_wrapper_sends_the_file_from_its_position(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 40)
    files: list[Any] = []

    def app(environ: Any, start_response: Any) -> Any:
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        file = path.open("rb")
        file.seek(10)
        files.append(file)
        return environ["wsgi.file_wrapper"](file, 4096)

    response = client_for(app).get("/")
    assert response.body == path.read_bytes()[10:]
    assert response.headers["Content-Length"] == str(256 * 40 - 10)
    assert files[0].closed


def test_file_wrapper_honours_a_shorter_content_length(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(b"0123456789")

    def app(environ: Any, start_response: Any) -> Any:
        start_response("200 OK", [("Content-Length", "4")])
        return environ["wsgi.file_wrapper"](path.open("rb"))

    assert client_for(app).get("/").body == b"0123"


def test_file_wrapper_over_a_stream_without_a_path_is_read_in_blocks() -> None:
    import io

    def app(environ: Any, start_response: Any) -> Any:
        start_response("200 OK", [])
        return environ["wsgi.file_wrapper"](io.BytesIO(b"in memory " * 1000), 100)

    assert client_for(app).get("/").body == b"in memory " * 1000


def test_the_server_middleware_runs_before_a_mounted_app() -> None:
    seen: list[str] = []
    server = Server()

    def outer(req: Any, res: Any, next: Any) -> None:
        seen.append("middleware")
        next()
        res.set_header("X-Outer", "yes")

    def app(environ: Any, start_response: Any) -> list[bytes]:
        seen.append("app")
        start_response("200 OK", [])
        return [b"legacy"]

    server.use(outer)
    server.mount("/legacy", app)
    server.get("/legacy/moved", lambda req, res: res.send("native"))
    client = TestClient(server)
    response = client.get("/legacy/page")
    assert (response.body, response.headers["X-Outer"], seen) == (
        b"legacy",
        "yes",
        ["middleware", "app"],
    )
    assert client.get("/legacy/moved").body == b"native"  # a route moved to Socketify wins


def test_a_wrapped_file_on_disk_becomes_a_file_range_for_sendfile(tmp_path: Path) -> None:
    from socketify.wsgi import FileWrapper

    path = tmp_path / "page.html"
    path.write_bytes(b"<p>" * 1000)
    file = path.open("rb")
    file.read(30)  # a file the app positioned
    res = Response()
    answer = Answer(res)
    answer.start_response("200 OK", [("Content-Type", "text/html")])
    answer.respond(FileWrapper(file))
    assert (res.kind, res.file_path, res.file_offset, res.file_length) == (
        "file",
        str(path),
        30,
        2970,
    )
    res.close()
    assert file.closed


def test_a_wrapped_file_replaced_on_disk_is_streamed_from_the_open_file(tmp_path: Path) -> None:
    from socketify.wsgi import FileWrapper

    path = tmp_path / "data.txt"
    path.write_bytes(b"old contents")
    file = path.open("rb")
    path.unlink()
    path.write_bytes(b"new")  # the same name, another file
    res = Response()
    answer = Answer(res)
    answer.start_response("200 OK", [])
    answer.respond(FileWrapper(file))
    assert res.kind != "file"
    sent = b"".join(res.iter_stream()) if res.kind == "stream" else res.body
    assert sent == b"old contents"
    res.close()


def test_a_body_without_a_content_type_gets_none_added() -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"<html>untyped</html>"]

    response = client_for(app).get("/")
    assert response.body == b"<html>untyped</html>"
    assert "Content-Type" not in response.headers
    assert response.headers["Content-Length"] == "20"
