"""Serialization of finished responses: the per-second reuse of plain heads."""

from __future__ import annotations

import time

import pytest

from socketify import Response
from socketify.core import response_wire
from socketify.protocol.http11 import DateLines, http_date

START = 1_600_000_000.25


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A settable clock behind both the Date line and the plain-head cache."""
    now = [START]
    monkeypatch.setattr(time, "time", lambda: now[0])
    monkeypatch.setattr(response_wire, "_time", lambda: now[0])
    # Fresh caches: the real ones hold heads dated by the real clock.
    monkeypatch.setattr(response_wire, "_DATE", DateLines())
    monkeypatch.setattr(response_wire, "_PLAIN", response_wire._PlainHeads())
    return now


def plain(body: bytes = b"ok", status: int = 200, content_type: str | None = "text/plain") -> bytes:
    res = Response()
    if content_type is not None:
        res.set_header("Content-Type", content_type)
    res.status(status).send(body)
    return res.to_bytes(True)


def test_a_plain_head_is_reused_within_a_second_and_redated_in_the_next(clock) -> None:
    first = plain()
    assert plain() == first
    assert f"Date: {http_date(START)}\r\n".encode() in first
    clock[0] += 1.0
    later = plain()
    assert f"Date: {http_date(START + 1)}\r\n".encode() in later
    assert later.replace(http_date(START + 1).encode(), http_date(START).encode()) == first


def test_plain_heads_differ_by_status_type_length_and_connection(clock) -> None:
    assert b"Content-Length: 3\r\n" in plain(b"abc") and b"Content-Length: 2\r\n" in plain(b"ab")
    assert plain(status=201).startswith(b"HTTP/1.1 201 Created\r\n")
    assert b"Content-Type: application/json\r\n" in plain(content_type="application/json")
    assert b"Content-Type" not in plain(b"", content_type=None)
    res = Response()
    res.send(b"ok")
    assert res.to_bytes(False).endswith(b"Connection: close\r\n\r\nok")
    assert res.to_bytes(True).endswith(b"Connection: keep-alive\r\n\r\nok")
    res.close_connection = True
    assert res.to_bytes(True).endswith(b"Connection: close\r\n\r\nok")


def test_plain_heads_of_bodiless_statuses_carry_no_body(clock) -> None:
    for _ in range(2):  # built, then reused
        wire = plain(b"ignored", status=204, content_type=None)
        assert wire.endswith(b"\r\n\r\n") and b"ignored" not in wire


def with_own_lines(res: Response) -> Response:
    res.set_header("RateLimit-Limit", "10")
    res.add_header("Set-Cookie", "sid=abc; Path=/; HttpOnly")
    res.set_cookie("theme", "dark")
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')
    return res


def test_a_head_with_its_own_lines_reuses_the_cached_parts_in_wire_order(clock) -> None:
    plain(b'{"ok":true}', content_type="application/json")  # caches the parts for this key
    wire = with_own_lines(Response()).to_bytes(True)
    assert wire == (
        b"HTTP/1.1 200 OK\r\n"
        + f"Date: {http_date(START)}\r\nServer: socketify\r\n".encode()
        + b"RateLimit-Limit: 10\r\nSet-Cookie: sid=abc; Path=/; HttpOnly\r\n"
        + b"Set-Cookie: theme=dark; Path=/\r\nContent-Type: application/json\r\n"
        + b'Content-Length: 11\r\nConnection: keep-alive\r\n\r\n{"ok":true}'
    )
    res = with_own_lines(Response())
    assert res.to_bytes(True) == res.head_bytes(True) + res.body  # same as line by line
    assert b"RateLimit" not in plain(b'{"ok":true}', content_type="application/json")


def test_own_lines_follow_the_status_connection_and_bodiless_rules(clock) -> None:
    res = Response()
    res.set_header("X-Count", "1")
    res.status(204).send(b"dropped")
    wire = res.to_bytes(True)
    assert wire.startswith(b"HTTP/1.1 204 No Content\r\n") and b"Content-Length" not in wire
    assert wire.endswith(b"X-Count: 1\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         b"Connection: keep-alive\r\n\r\n")  # fmt: skip
    res = Response()
    res.set_header("X-Count", "2")
    res.send(b"ok")
    res.close_connection = True
    assert res.to_bytes(True).endswith(
        b"X-Count: 2\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\nok"
    )


@pytest.mark.parametrize("bad", ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\x00b"])
def test_values_that_would_split_the_head_are_refused_on_the_fast_path(bad: str) -> None:
    res = Response()
    res.set_header("X-Seen", "ok").add_header("X-Seen", "ok")  # the name is now remembered
    for setter in (res.set_header, res.add_header):
        for name in ("X-Seen", "Set-Cookie", "Content-Type"):
            with pytest.raises(ValueError, match="CR, LF or NUL"):
                setter(name, bad)
    assert res.headers.getall("X-Seen") == ["ok", "ok"] and not res.cookies


def test_remembered_names_are_bounded_and_invalid_names_never_pass(monkeypatch) -> None:
    from socketify.core import response_headers

    remembered = dict(response_headers.CHECKED_NAMES)
    response_headers.CHECKED_NAMES.clear()  # the same dict Response reads
    monkeypatch.setattr(response_headers, "CHECKED_NAMES_MAX", 4)
    try:
        res = Response()
        for i in range(10):
            res.set_header(f"X-Name-{i}", "v")
        assert len(response_headers.CHECKED_NAMES) == 4
    finally:
        response_headers.CHECKED_NAMES.clear()
        response_headers.CHECKED_NAMES.update(remembered)
    assert res.get_header("x-name-9") == "v"
    for bad in ("Bad Name", "X:Y", "X\r\nY", ""):
        with pytest.raises(ValueError, match="invalid header name"):
            res.set_header(bad, "v")
        with pytest.raises(ValueError, match="invalid header name"):
            res.add_header(bad, "v")
