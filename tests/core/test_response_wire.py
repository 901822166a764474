"""Serialization of finished responses: the per-second reuse of plain heads."""

from __future__ import annotations

import time

import pytest

from socketify import Response, response_wire
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
