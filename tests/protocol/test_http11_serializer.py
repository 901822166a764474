"""Response heads: layout, reason phrases, and refusal of response splitting."""

from __future__ import annotations

import re

import pytest

from socketify.protocol.http11 import encode_chunk, http_date, reason, serialize_head


def test_head_has_status_line_date_server_headers_and_blank_line() -> None:
    head = serialize_head(200, [("Content-Type", "application/json"), ("Content-Length", "11")])
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    assert re.fullmatch(r"Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT", lines[1])
    assert lines[2] == "Server: socketify"
    assert lines[3:] == ["Content-Type: application/json", "Content-Length: 11", "", ""]


@pytest.mark.parametrize(
    ("status", "phrase"), [(404, "Not Found"), (418, "I'm a Teapot"), (413, "Payload Too Large")]
)
def test_known_reasons_come_from_http_status(status: int, phrase: str) -> None:
    assert reason(status) == phrase


def test_unknown_status_reason_is_unknown() -> None:
    assert reason(599) == "Unknown"
    assert serialize_head(599, []).startswith(b"HTTP/1.1 599 Unknown\r\n")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Evil", "a\r\nSet-Cookie: stolen=1"),
        ("X-Evil", "a\nb"),
        ("X-Evil", "a\x00b"),
        ("X-Evil", "a\x01b"),
        ("X-Evil", "\x1b]8;;http://evil/\x07"),
        ("X-Evil", "a\x7f"),
        ("X-Evil\r\nInjected", "v"),
        ("Bad Name", "v"),
        ("", "v"),
    ],
)
def test_header_injection_is_refused(name: str, value: str) -> None:
    with pytest.raises(ValueError):
        serialize_head(200, [(name, value)])


def test_http_date_is_imf_fixdate() -> None:
    assert http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"


def test_chunks_are_hex_length_prefixed_and_empty_ones_skipped() -> None:
    assert encode_chunk(b"hello world!!!!!") == b"10\r\nhello world!!!!!\r\n"
    assert encode_chunk(b"") == b""
