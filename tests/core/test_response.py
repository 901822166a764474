"""Response building, and its bytes on the wire, byte-exact where it matters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from socketify import Request, Response, Server
from socketify.protocol.http11 import http_date
from tests.support.wire import wire_bytes

DATE = re.compile(rb"Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n")


def wire_without_date(res: Response, keep_alive: bool = True) -> bytes:
    """The serialized response with its (time-dependent) Date line checked and removed."""
    data = wire_bytes(res, keep_alive=keep_alive)
    assert len(DATE.findall(data)) == 1
    return DATE.sub(b"", data)


def test_ping_is_byte_exact_and_138_bytes(call) -> None:
    server = Server()

    def ping(req: Request, res: Response) -> None:
        res.set_header("Content-Type", "application/json")
        res.send(b'{"ok":true}')

    server.get("/ping", ping)
    res = call(server, "GET", "/ping")
    data = wire_bytes(res)
    assert len(data) == 138
    assert DATE.sub(b"", data) == (
        b"HTTP/1.1 200 OK\r\n"
        b"Server: socketify\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: 11\r\n"
        b"\r\n"
        b'{"ok":true}'
    )
    assert data.startswith(b"HTTP/1.1 200 OK\r\nDate: ")


def test_header_order_user_headers_cookies_type_length_connection() -> None:
    res = Response()
    res.set_header("X-A", "1").add_header("X-B", "2").add_header("X-B", "3")
    res.set_cookie("c", "v")
    res.send("hi")
    assert wire_without_date(res, keep_alive=False) == (
        b"HTTP/1.1 200 OK\r\nServer: socketify\r\nX-A: 1\r\nX-B: 2\r\nX-B: 3\r\n"
        b"Set-Cookie: c=v; Path=/\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\nhi"
    )


@pytest.mark.parametrize("code", [204, 304, 100, 101])
def test_no_body_statuses_have_no_body_and_no_content_length(code: int) -> None:
    res = Response()
    res.status(code).send("ignored")
    data = wire_bytes(res)
    assert b"Content-Length" not in data
    assert data.endswith(b"\r\n\r\n")


def test_send_status_204_and_304_have_no_body() -> None:
    for code in (204, 304):
        res = Response()
        res.send_status(code)
        assert res.body == b"" and res.content_type is None


def test_send_status_body_is_reason() -> None:
    res = Response()
    res.send_status(404)
    assert (res.status_code, res.body, res.content_type) == (
        404,
        b"Not Found\n",
        "text/plain; charset=utf-8",
    )


def test_unknown_status_reasons() -> None:
    res = Response()
    res.status(299).send("x")
    assert wire_bytes(res).startswith(b"HTTP/1.1 299 Unknown\r\n")
    teapot = Response()
    teapot.status(418).send("x")
    assert wire_bytes(teapot).startswith(b"HTTP/1.1 418 I'm a Teapot\r\n")


def test_pinned_reasons() -> None:
    res = Response()
    res.status(413).end()
    assert wire_bytes(res).startswith(b"HTTP/1.1 413 Payload Too Large\r\n")


def test_unset_status_is_200() -> None:
    res = Response()
    assert res.status_code == 200
    res.end()
    assert wire_bytes(res).startswith(b"HTTP/1.1 200 OK\r\n")


@pytest.mark.parametrize("code", [0, 99, 1000, True])
def test_invalid_status_codes_are_refused(code) -> None:
    with pytest.raises(ValueError):
        Response().status(code)


def test_a_header_value_that_is_no_text_is_sent_as_its_str() -> None:
    res = Response().set_header("X-Count", 3).add_header("X-Ratio", 0.5)
    res.end()
    data = wire_without_date(res)
    assert b"X-Count: 3\r\n" in data and b"X-Ratio: 0.5\r\n" in data


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_bytes_like_bodies_are_sent_as_bytes(kind: type) -> None:
    written = Response()
    written.write(kind(b"ab"))
    written.end(kind(b"c"))
    sent = Response()
    sent.send(kind(b"abc"))
    assert written.body == sent.body == b"abc"
    assert Response().html(kind(b"<p>")) is True


@pytest.mark.parametrize("code", ["200", 200.0, None])
def test_a_status_code_that_is_no_int_is_a_type_error(code) -> None:
    with pytest.raises(TypeError):
        Response().status(code)


def test_head_request_has_get_headers_but_no_body(make_request) -> None:
    res = Response(make_request("HEAD", "/"))
    res.send("hello")
    data = wire_bytes(res)
    assert b"Content-Length: 5\r\n" in data and data.endswith(b"\r\n\r\n")
    assert res.head_only


def test_send_keeps_existing_type_and_sniffs_html() -> None:
    res = Response()
    res.set_header("content-type", "text/csv")
    res.send("a,b", "text/plain")
    assert res.content_type == "text/csv"
    html = Response()
    html.send("  <!DOCTYPE html><p>")
    assert html.content_type == "text/html; charset=utf-8"
    other = Response()
    other.send(b"<HTML>")
    assert other.content_type == "text/html; charset=utf-8"
    empty = Response()
    empty.send(b"")
    assert empty.content_type is None


def test_send_after_end_changes_nothing() -> None:
    res = Response()
    assert res.send("a") is True
    assert res.send("b") is False
    assert res.write("c") is False
    assert res.end() is False
    assert res.json({}) is False
    assert res.body == b"a"


def test_json_always_overwrites_type() -> None:
    res = Response()
    res.set_header("Content-Type", "text/plain")
    res.json({"a": 1, 2: [True, None]})
    assert res.content_type == "application/json; charset=utf-8"
    assert res.body == b'{"a":1,"2":[true,null]}'


def test_json_error_shape() -> None:
    res = Response()
    res.json_error(422, "bad")
    assert (res.status_code, res.body) == (422, b'{"error":"bad"}')


def test_html_helper() -> None:
    res = Response()
    res.html("<b>x</b>")
    assert res.content_type == "text/html; charset=utf-8"


def test_write_then_end_is_one_buffered_body() -> None:
    res = Response()
    res.write("a")
    res.write(b"b")
    res.end("c")
    assert res.body == b"abc" and res.kind == "buffered"
    assert b"Content-Length: 3\r\n" in wire_bytes(res)


def test_send_rejects_other_types() -> None:
    with pytest.raises(TypeError):
        Response().send(123)  # type: ignore[arg-type]


# -- headers we own -------------------------------------------------------------------------


def test_set_header_replaces_case_insensitively_and_remove() -> None:
    res = Response()
    res.set_header("X-Thing", "1").set_header("x-thing", "2")
    assert res.get_header("X-THING") == "2"
    res.add_header("x-thing", "3")
    assert res.get_header("x-thing") == "2, 3"
    res.remove_header("X-Thing")
    assert res.get_header("x-thing") is None
    assert res.get_header("x-thing", "d") == "d"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-A", "a\r\nInjected: 1"),
        ("X-A", "a\nb"),
        ("X-A", "a\x00"),
        ("X-A", "a\x01b"),
        ("X-A", "a\x1b[31mred"),
        ("X-A", "a\x0bb"),
        ("X-A", "a\x0cb"),
        ("X-A", "a\x7f"),
        ("X-A", "a\rb"),
        ("X\x01A", "v"),
        ("X A", "v"),
        ("X:A", "v"),
        ("", "v"),
        ("X-A", "\u20ac"),
    ],
)
def test_header_injection_is_refused_at_set_time(name: str, value: str) -> None:
    with pytest.raises(ValueError):
        Response().set_header(name, value)
    with pytest.raises(ValueError):
        Response().add_header(name, value)


def test_a_tab_and_obs_text_in_a_header_value_are_allowed() -> None:
    res = Response().set_header("X-A", "a\tb \xe9")
    assert res.get_header("x-a") == "a\tb \xe9"


def test_latin1_header_value_is_allowed() -> None:
    res = Response()
    res.set_header("X-Name", "caf\u00e9").end()
    assert "X-Name: caf\u00e9".encode("latin-1") in wire_bytes(res)


def test_user_date_and_server_replace_ours() -> None:
    res = Response()
    res.set_header("Date", "Sun, 06 Nov 1994 08:49:37 GMT").set_header("Server", "mine").end()
    data = wire_bytes(res)
    assert data.count(b"Date:") == 1 and b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" in data
    assert data.count(b"Server:") == 1 and b"Server: mine\r\n" in data


def test_user_framing_headers_are_ignored() -> None:
    res = Response()
    res.set_header("Content-Length", "999").set_header("Transfer-Encoding", "chunked")
    res.set_header("Connection", "keep-alive").send("ab")
    data = wire_bytes(res, keep_alive=False)
    assert b"Content-Length: 2\r\n" in data and b"999" not in data
    assert b"Transfer-Encoding" not in data
    assert data.count(b"Connection:") == 1 and b"Connection: close\r\n" in data


def test_connection_close_from_handler_closes() -> None:
    res = Response()
    res.set_header("Connection", "close").send("x")
    assert res.close_connection
    assert b"Connection: close\r\n" in wire_bytes(res)


def test_headers_view_is_read_only_snapshot() -> None:
    res = Response()
    res.set_header("X-A", "1").send("x")
    view = res.headers
    assert view["x-a"] == "1" and view["Content-Type"] == "text/plain; charset=utf-8"
    with pytest.raises(TypeError):
        view["X-B"] = "2"


# -- redirect -------------------------------------------------------------------------------


def test_redirect_escapes_body_and_sets_location() -> None:
    res = Response()
    res.redirect('/search?q="<script>"&x=1 2')
    assert res.status_code == 302
    location = res.get_header("Location")
    assert location == "/search?q=%22%3Cscript%3E%22&x=1%202"
    assert b"<script>" not in res.body
    assert b"Redirecting to" in res.body
    assert res.content_type == "text/html; charset=utf-8"


def test_redirect_keeps_html_specials_escaped_in_body() -> None:
    res = Response()
    res.redirect("/a?x=1&y='2'", 301)
    assert res.status_code == 301
    assert b"&amp;" in res.body and b"'2'" not in res.body


def test_redirect_percent_encodes_non_ascii() -> None:
    res = Response()
    res.redirect("/caf\u00e9")
    assert res.get_header("Location") == "/caf%C3%A9"


@pytest.mark.parametrize("url", ["/a\r\nSet-Cookie: x=1", "/a\nb", "/a\x00"])
def test_redirect_refuses_crlf(url: str) -> None:
    with pytest.raises(ValueError):
        Response().redirect(url)


# -- cookies --------------------------------------------------------------------------------


def test_cookie_attributes_in_spec_order() -> None:
    res = Response()
    res.set_cookie(
        "sid", "abc", max_age=60, expires=784111777, path="/app", domain="ex.com",
        secure=True, http_only=True, same_site="lax",
    )  # fmt: skip
    assert res.cookies == [
        "sid=abc; Path=/app; Domain=ex.com; Max-Age=60; "
        "Expires=Sun, 06 Nov 1994 08:49:37 GMT; Secure; HttpOnly; SameSite=Lax"
    ]


def test_each_cookie_gets_its_own_line_and_clear_cookie() -> None:
    res = Response()
    res.set_cookie("a", "1").set_cookie("b", "2", path=None).clear_cookie("old")
    res.end()
    data = wire_bytes(res)
    assert b"Set-Cookie: a=1; Path=/\r\n" in data
    assert b"Set-Cookie: b=2\r\n" in data
    assert b"Set-Cookie: old=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT\r\n" in data


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("a b", "v"),
        ("a;b", "v"),
        ("", "v"),
        ("a", "v;Path=/x"),
        ("a", "v,w"),
        ("a", "v\r\nX: 1"),
        ("a", "v\n"),
        ("a=", "v"),
    ],
)
def test_bad_cookie_names_and_values_are_refused(name: str, value: str) -> None:
    with pytest.raises(ValueError):
        Response().set_cookie(name, value)


def test_cookie_domain_and_path_are_checked_too() -> None:
    with pytest.raises(ValueError):
        Response().set_cookie("a", "1", path="/x;Secure")
    with pytest.raises(ValueError):
        Response().set_cookie("a", "1", domain="ex.com\r\n")
    with pytest.raises(ValueError):
        Response().set_cookie("a", "1", same_site="sometimes")


# -- other body kinds -----------------------------------------------------------------------


def test_send_file_records_range_and_headers(tmp_path: Path) -> None:
    target = tmp_path / "page.HTML"
    target.write_bytes(b"<p>hello</p>")
    res = Response()
    assert res.send_file(target) is True
    assert (res.kind, res.file_path, res.file_offset, res.file_length) == (
        "file", str(target), 0, 12,
    )  # fmt: skip
    assert res.content_type == "text/html; charset=utf-8"
    data = wire_bytes(res)
    assert b"Content-Length: 12\r\n" in data and data.endswith(b"\r\n\r\n<p>hello</p>")


def test_send_file_range(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    target.write_bytes(b"0123456789")
    res = Response()
    assert res.send_file(target, offset=2, length=5)
    assert b"Content-Length: 5\r\n" in wire_bytes(res)
    assert Response().send_file(target, offset=8, length=5) is False


def test_send_file_download_names_are_escaped(tmp_path: Path) -> None:
    target = tmp_path / "report.pdf"
    target.write_bytes(b"%PDF")
    res = Response()
    res.send_file(target, download=True, name='r\u00e9sum\u00e9 "final".pdf')
    disposition = res.get_header("Content-Disposition")
    assert disposition == (
        'attachment; filename="resume \\"final\\".pdf"; '
        "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf"
    )
    assert res.content_type == "application/pdf"
    plain = Response()
    plain.send_file(target, download=True)
    assert plain.get_header("Content-Disposition") == 'attachment; filename="report.pdf"'


def test_send_file_refuses_directories_and_missing_files(tmp_path: Path) -> None:
    res = Response()
    assert res.send_file(tmp_path) is False
    assert res.send_file(tmp_path / "missing") is False
    assert res.send_file("bad\x00path") is False
    assert not res.ended


def test_send_file_keeps_an_existing_type(tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    target.write_text("x")
    res = Response()
    res.set_header("Content-Type", "text/x-custom")
    res.send_file(target)
    assert res.content_type == "text/x-custom"


def test_stream_is_chunked_and_skips_empty_chunks() -> None:
    res = Response()
    res.write("first")
    assert res.stream(iter(["a", b"", b"b"]))
    assert res.kind == "stream"
    data = wire_bytes(res)
    assert b"Transfer-Encoding: chunked\r\n" in data and b"Content-Length" not in data
    assert data.endswith(b"\r\n\r\n5\r\nfirst\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n")


def test_stream_to_http10_closes_instead_of_chunking(make_request) -> None:
    res = Response(make_request("GET", "/", version="HTTP/1.0"))
    res.stream([b"x"])
    data = wire_bytes(res, version="HTTP/1.0")
    assert b"Transfer-Encoding" not in data and b"Connection: close\r\n" in data


def test_upgrade_kind_has_no_framing_and_own_connection() -> None:
    res = Response()
    res.status(101).set_header("Upgrade", "websocket").set_header("Connection", "Upgrade")
    res.upgrade = lambda conn: None
    res.end()
    data = wire_bytes(res)
    assert res.kind == "upgrade"
    assert b"Connection: Upgrade\r\n" in data and b"Content-Length" not in data
    sse = Response()
    sse.set_header("Content-Type", "text/event-stream")
    sse.upgrade = lambda conn: None
    sse.end()
    assert b"Connection: close\r\n" in wire_bytes(sse)
    assert b"Content-Length" not in wire_bytes(sse)


def test_replace_body_updates_content_length() -> None:
    res = Response()
    res.send("x" * 100)
    res.replace_body(b"short")
    res.set_header("Content-Encoding", "gzip")
    data = wire_bytes(res)
    assert b"Content-Length: 5\r\n" in data and data.endswith(b"short")


def test_reset_for_error_keeps_headers_and_cookies() -> None:
    res = Response()
    res.set_header("X-Keep", "1").set_header("Content-Encoding", "gzip").set_cookie("a", "1")
    res.send("x")
    res.reset_for_error()
    assert not res.ended and res.body == b"" and res.content_type is None
    assert res.get_header("X-Keep") == "1" and res.get_header("Content-Encoding") is None
    assert res.cookies == ["a=1; Path=/"]


def test_http_date_format() -> None:
    assert http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"


def test_sends_body_is_false_for_head_and_bodiless_statuses(make_request, tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("abc")
    head = Response(make_request("HEAD", "/"))
    head.send_file(target)
    assert not head.sends_body and b"Content-Length: 3\r\n" in wire_bytes(head)
    for code in (101, 204, 304):
        assert not Response().status(code).sends_body
    assert Response().sends_body


def test_add_header_adds_lines_and_set_header_replaces_them() -> None:
    res = Response()
    res.set_header("X-A", "old").set_header("X-A", "new")
    res.add_header("Set-Cookie", "a=1").add_header("Set-Cookie", "b=2")
    res.add_header("Server", "one").add_header("Server", "two")  # one value: adding replaces
    res.send(b"x")
    assert res.get_header("x-a") == "new" and res.get_header("server") == "two"
    assert res.headers.getall("set-cookie") == ["a=1", "b=2"]
    wire = wire_bytes(res)
    assert wire.count(b"X-A: new\r\n") == 1 and b"old" not in wire
    assert b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n" in wire
    assert wire.count(b"Server: ") == 1 and b"Server: two\r\n" in wire


def test_fields_and_body_length_are_what_the_connection_writes(tmp_path: Path) -> None:
    res = Response()
    res.set_header("X-A", "1").set_cookie("c", "v").write("ab")
    res.end("c")
    assert [(field[1], field[2]) for field in res.fields()] == [
        ("X-A", "1"),
        ("Set-Cookie", "c=v; Path=/"),
        ("Content-Type", "text/plain; charset=utf-8"),
    ]
    assert res.body_length == 3
    target = tmp_path / "f.bin"
    target.write_bytes(b"0123456789")
    ranged = Response()
    ranged.send_file(target, offset=2, length=5)
    assert ranged.body_length == 5
    streamed = Response()
    streamed.stream([b"x"])
    assert streamed.body_length is None


def test_a_stream_with_a_length_declares_it_and_stops_there() -> None:
    res = Response()
    res.stream([b"abc", "def", b"ghi"], length=7)
    assert res.body_length == 7
    assert list(res.iter_stream()) == [b"abc", b"def", b"g"]


def test_a_stream_shorter_than_its_length_fails() -> None:
    res = Response()
    res.stream([b"abc"], length=5)
    with pytest.raises(ValueError, match="2 bytes short"):
        list(res.iter_stream())


def test_close_callbacks_run_once_in_order_even_when_one_fails() -> None:
    calls: list[str] = []
    res = Response()

    def failing() -> None:
        calls.append("failing")
        raise RuntimeError("callback bug")

    res.call_on_close(lambda: calls.append("first")).call_on_close(failing)
    res.call_on_close(lambda: calls.append("last"))
    res.close()
    res.close()
    assert calls == ["first", "failing", "last"]
