"""Cookies, MIME types, status reasons, multi-dicts — plus property tests for hostile input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socketify import HTTPError, Response
from socketify.core.cookies import build_set_cookie, expired_cookie, parse_cookie_header
from socketify.core.headers import Headers, MultiDict
from socketify.core.mime import guess_type
from socketify.core.routing import split_path
from socketify.core.urlencoded import parse_query
from socketify.protocol.http11.status import reason, status_line
from tests.support.wire import wire_bytes


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/index.HTML", "text/html; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("m.mjs", "text/javascript; charset=utf-8"),
        ("x.json", "application/json; charset=utf-8"),
        ("x.svg", "image/svg+xml"),
        ("x.woff2", "font/woff2"),
        ("archive.tar.gz", "application/gzip"),
        ("noext", "application/octet-stream"),
        ("dir.d/noext", "application/octet-stream"),
        (".env", "application/octet-stream"),
        ("x.unknown", "application/octet-stream"),
    ],
)
def test_guess_type(path: str, expected: str) -> None:
    assert guess_type(path) == expected


def test_reasons() -> None:
    assert reason(200) == "OK"
    assert reason(422) == "Unprocessable Entity"
    assert reason(599) == "Unknown"
    assert status_line(404) == "HTTP/1.1 404 Not Found\r\n"
    assert status_line(799) == "HTTP/1.1 799 Unknown\r\n"


def test_build_set_cookie_minimal_and_expiry_forms() -> None:
    assert build_set_cookie("k", "v", path=None) == "k=v"
    aware = datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)
    naive = datetime(1994, 11, 6, 8, 49, 37)
    for when in (aware, naive, 784111777, 784111777.5):
        assert "Expires=Sun, 06 Nov 1994 08:49:37 GMT" in build_set_cookie("k", "v", expires=when)
    assert "Max-Age=3600" in build_set_cookie("k", "v", max_age=timedelta(hours=1))
    with pytest.raises(TypeError):
        build_set_cookie("k", "v", expires="tomorrow")  # type: ignore[arg-type]


def test_expired_cookie_with_domain() -> None:
    assert expired_cookie("s", "/", "ex.com") == (
        "s=; Path=/; Domain=ex.com; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT"
    )


def test_parse_cookie_header_edge_cases() -> None:
    assert parse_cookie_header("") == {}
    assert parse_cookie_header(' a = "x" ;b=') == {"a": "x", "b": ""}
    assert parse_cookie_header('q="') == {"q": '"'}


def test_multidict_and_headers() -> None:
    md = MultiDict([("a", "1"), ("b", "2"), ("a", "3")])
    assert md["a"] == "3" and md.getall("a") == ["1", "3"] and md.getall("z") == []
    assert list(md) == ["a", "b"] and len(md) == 2
    assert md.multi_items() == [("a", "1"), ("a", "3"), ("b", "2")]
    h = Headers([("X-A", "1")])
    h.add("x-a", "2")
    assert h["x-a"] == "1, 2" and h.get("X-A") == "1, 2" and h.get("nope") is None
    del h["X-A"]
    assert "x-a" not in h and len(h) == 0


# -- property tests: hostile input never escapes as an exception or a split response --------


@given(st.text())
def test_parse_query_never_raises(text: str) -> None:
    for key, _ in parse_query(text).multi_items():
        assert key


@given(st.text(alphabet=st.sampled_from("/%aZ09.fF2\x00"), max_size=30))
def test_split_path_returns_or_400(path: str) -> None:
    try:
        segments = split_path("/" + path)
    except HTTPError as exc:
        assert exc.status == 400
    else:
        assert all(segments) and not any("\x00" in s for s in segments)


@given(st.text(max_size=20), st.text(max_size=40))
def test_set_header_accepts_or_refuses_but_never_splits(name: str, value: str) -> None:
    res = Response()
    try:
        res.set_header(name, value)
    except ValueError:
        return
    res.end()
    head = wire_bytes(res).split(b"\r\n\r\n", 1)[0]
    for line in head.split(b"\r\n")[1:]:
        assert b":" in line and b"\n" not in line and b"\r" not in line


@given(st.text(max_size=20), st.text(max_size=40))
def test_set_cookie_accepts_or_refuses_but_never_splits(name: str, value: str) -> None:
    res = Response()
    try:
        res.set_cookie(name, value)
    except ValueError:
        return
    head = wire_bytes(res)
    assert head.count(b"Set-Cookie:") == 1
    assert head.count(b"\r\n") == head.count(b"\n")
