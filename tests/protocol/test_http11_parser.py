"""The sans-IO request parser: every rule, fed in one piece and byte by byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socketify.protocol.http11 import (
    CLOSED,
    END_OF_MESSAGE,
    NEED_DATA,
    ParseError,
    RequestHead,
    RequestParser,
)

CORPUS = Path(__file__).parent / "corpus"


def parse(raw: bytes, *, split: int | None = None, eof: bool = False, **limits: Any) -> list:
    """All events of `raw`, fed in one piece (split=None) or in pieces of `split` bytes."""
    parser = RequestParser(**limits)
    pieces = [raw] if split is None else [raw[i : i + split] for i in range(0, len(raw), split)]
    events: list = []
    for piece in pieces:
        parser.feed(piece)
        events.extend(drain(parser))
    if eof:
        parser.feed(b"")
        events.extend(drain(parser))
    return merge_bodies(events)


def drain(parser: RequestParser) -> list:
    events = []
    while (event := parser.next_event()) is not NEED_DATA:
        events.append(event)
        if event is CLOSED:
            break
    return events


def merge_bodies(events: list) -> list:
    """Join consecutive body pieces, so one-piece and byte-wise feeds compare equal."""
    merged: list = []
    for event in events:
        if isinstance(event, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += event
        else:
            merged.append(event)
    return merged


def refusal(raw: bytes, *, split: int | None = None, eof: bool = False, **limits: Any) -> int:
    with pytest.raises(ParseError) as caught:
        parse(raw, split=split, eof=eof, **limits)
    return caught.value.status


def heads(events: list) -> list[RequestHead]:
    return [event for event in events if isinstance(event, RequestHead)]


def describe(events: list) -> list:
    """Comparable form of events: heads become tuples of their fields."""
    out = []
    for event in events:
        if isinstance(event, RequestHead):
            out.append(
                (
                    event.method,
                    event.target,
                    event.path,
                    event.query_string,
                    event.version,
                    list(event.headers),
                    event.content_length,
                    event.chunked,
                    event.keep_alive,
                    event.expect_continue,
                )
            )
        else:
            out.append(event)
    return out


@pytest.mark.parametrize("split", [None, 1, 2, 7])
def test_simple_get_yields_head_then_end(split: int | None) -> None:
    events = parse(
        b"GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nX-Id: 7\r\n\r\n", split=split
    )
    head, end = events
    assert isinstance(head, RequestHead)
    assert (head.method, head.target, head.path, head.query_string) == (
        "GET",
        "/a/b?x=1&y=2",
        "/a/b",
        "x=1&y=2",
    )
    assert head.version == "HTTP/1.1"
    assert list(head.headers) == [("host", "example.com"), ("x-id", "7")]
    assert head.keep_alive and not head.has_body
    assert end is END_OF_MESSAGE


def test_header_names_are_lowered_and_values_trimmed() -> None:
    (head, _) = parse(b"GET / HTTP/1.1\r\nHOST: x\r\nX-Pad: \t padded value \t\r\n\r\n")
    assert list(head.headers) == [("host", "x"), ("x-pad", "padded value")]


@pytest.mark.parametrize(
    ("request_line_and_headers", "keep_alive"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n", True),
        (b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", False),
        (b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive, CLOSE\r\n", False),
        (b"GET / HTTP/1.0\r\n", False),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n", True),
        (b"GET / HTTP/1.0\r\nConnection: upgrade, keep-alive\r\n", True),
    ],
)
def test_keep_alive_follows_version_and_connection(
    request_line_and_headers: bytes, keep_alive: bool
) -> None:
    (head, _) = parse(request_line_and_headers + b"\r\n")
    assert head.keep_alive is keep_alive


@pytest.mark.parametrize("split", [None, 1, 3])
def test_content_length_body_is_delivered_exactly(split: int | None) -> None:
    raw = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789GET"
    events = parse(raw, split=split)
    assert describe(events)[1:] == [b"0123456789", END_OF_MESSAGE]
    assert heads(events)[0].content_length == 10


@pytest.mark.parametrize("split", [None, 1, 2, 5])
def test_chunked_body_with_extensions_and_trailers(split: int | None) -> None:
    raw = (
        b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n6 ; ext\r\n world\r\nA\r\n0123456789\r\n"
        b"0\r\nX-Trailer: t\r\n\r\n"
    )
    events = parse(raw, split=split)
    assert heads(events)[0].chunked
    assert events[1:] == [b"hello world0123456789", END_OF_MESSAGE]


CHUNKED_HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("split", [None, 1, 3])
def test_trailers_of_a_chunked_body_are_kept_without_the_forbidden_ones(
    split: int | None,
) -> None:
    parser = RequestParser()
    raw = CHUNKED_HEAD + (
        b"3\r\nabc\r\n0\r\nX-Checksum:  abc123 \r\nContent-Type: text/evil\r\n"
        b"Host: evil\r\nTransfer-Encoding: gzip\r\nx-checksum: second\r\n"
        b"Content-Digest: sha-256=:x:\r\nAuthorization: Basic eA==\r\n\r\n"
    )
    pieces = [raw] if split is None else [raw[i : i + split] for i in range(0, len(raw), split)]
    events: list = []
    for piece in pieces:
        parser.feed(piece)
        events.extend(drain(parser))
    assert merge_bodies(events)[1:] == [b"abc", END_OF_MESSAGE]
    assert parser.trailers == (
        ("x-checksum", "abc123"),
        ("x-checksum", "second"),
        ("content-digest", "sha-256=:x:"),
    )


def test_trailers_belong_to_the_body_that_just_ended() -> None:
    parser = RequestParser()
    parser.feed(CHUNKED_HEAD + b"0\r\nX-A: 1\r\n\r\n")
    drain(parser)
    assert parser.trailers == (("x-a", "1"),)
    parser.feed(CHUNKED_HEAD + b"0\r\n\r\n")
    drain(parser)
    assert parser.trailers == ()


@pytest.mark.parametrize(
    "line",
    [b" X-A: 1", b"X A: 1", b"X-A 1", b"X-A: \x01", b": 1"],
    ids=["obs-fold", "space-in-name", "no-colon", "control-char", "empty-name"],
)
def test_malformed_trailer_lines_are_400(line: bytes) -> None:
    assert refusal(CHUNKED_HEAD + b"0\r\n" + line + b"\r\n\r\n") == 400


@pytest.mark.parametrize("split", [None, 1])
@pytest.mark.parametrize(
    "body",
    [
        b"3\nabc\r\n0\r\n\r\n",  # after the chunk size
        b"3;x=y\nabc\r\n0\r\n\r\n",  # after a chunk extension
        b"3\r\nabc\n0\r\n\r\n",  # after the chunk data
        b"3\r\nabc\r\n0\n\r\n",  # after the last chunk
        b"3\r\nabc\r\n0\r\nX-T: 1\n\r\n",  # after a trailer field
        b"3\r\nabc\r\n0\r\n\n",  # the blank line ending the trailers
    ],
    ids=["size", "extension", "data", "last-chunk", "trailer", "end-of-trailers"],
)
def test_bare_lf_in_chunked_framing_is_400(body: bytes, split: int | None) -> None:
    assert refusal(CHUNKED_HEAD + body, split=split) == 400


def test_the_classic_bare_lf_chunked_smuggling_body_is_refused() -> None:
    # A proxy that only splits on CRLF sees one unterminated chunk line here.
    raw = b"POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n3;x=y\nabc\n0\n\n"
    assert refusal(raw) == 400


def test_a_bare_lf_head_may_carry_a_crlf_chunked_body_when_bare_lf_is_allowed() -> None:
    raw = b"POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n3\r\nabc\r\n0\r\n\r\n"
    assert parse(raw, allow_bare_lf=True)[1:] == [b"abc", END_OF_MESSAGE]


@pytest.mark.parametrize("split", [None, 1])
def test_bare_cr_in_a_chunk_line_is_400_before_the_line_ends(split: int | None) -> None:
    assert refusal(CHUNKED_HEAD + b"3\rabc", split=split) == 400  # no LF ever came


def test_a_cr_at_the_end_of_the_input_waits_for_its_lf() -> None:
    parser = RequestParser()
    parser.feed(CHUNKED_HEAD + b"3\r")
    assert isinstance(parser.next_event(), RequestHead)
    assert parser.next_event() is NEED_DATA
    parser.feed(b"\nabc\r\n0\r\n\r\n")
    assert drain(parser) == [b"abc", END_OF_MESSAGE]


@pytest.mark.parametrize("split", [None, 1])
@pytest.mark.parametrize(
    "extensions",
    [b";a", b";a=b", b" ; a ; b = c", b';q="a \\"quoted\\" value"', b';a=b;c;d=""', b"\t;\tx"],
)
def test_chunk_extensions_that_follow_the_grammar_are_ignored(
    extensions: bytes, split: int | None
) -> None:
    raw = CHUNKED_HEAD + b"3" + extensions + b"\r\nabc\r\n0" + extensions + b"\r\n\r\n"
    assert parse(raw, split=split)[1:] == [b"abc", END_OF_MESSAGE]


@pytest.mark.parametrize(
    "line",
    [b"3;", b"3;=v", b"3;a=", b"3;a=b c", b'3;a="open', b"3;a b", b"3 ", b"3 x", b"3;a=b;", b"3,a"],
)
def test_chunk_extensions_against_the_grammar_are_400(line: bytes) -> None:
    assert refusal(CHUNKED_HEAD + line + b"\r\nabc\r\n0\r\n\r\n") == 400


@pytest.mark.parametrize("size", [b"", b"x", b"-1", b"+1", b"0x3", b"1" * 17])
def test_invalid_chunk_sizes_are_400(size: bytes) -> None:
    assert refusal(CHUNKED_HEAD + size + b"\r\nabc\r\n0\r\n\r\n") == 400


@pytest.mark.parametrize("split", [None, 1, 4])
def test_pipelined_requests_come_out_in_order(split: int | None) -> None:
    raw = (
        b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"POST /3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n"
        b"GET /4 HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    events = parse(raw, split=split)
    assert [h.path for h in heads(events)] == ["/1", "/2", "/3", "/4"]
    assert events.count(END_OF_MESSAGE) == 4
    assert b"abc" in events and b"z" in events


def test_leading_blank_lines_are_skipped() -> None:
    (head, _) = parse(b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.path == "/"


def test_leading_bare_lf_blank_lines_are_skipped_only_when_bare_lf_is_allowed() -> None:
    raw = b"\r\n\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"
    assert refusal(raw) == 400
    (head, _) = parse(raw, allow_bare_lf=True)
    assert head.path == "/"


@pytest.mark.parametrize("split", [None, 1])
@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/1.1\nHost: x\r\n\r\n",  # after the request line
        b"GET / HTTP/1.1\r\nHost: x\n\r\n",  # after a header line
        b"GET / HTTP/1.1\r\nHost: x\r\n\n",  # the blank line ending the head
        b"GET / HTTP/1.1\nHost: x\n\n",  # everywhere
        b"GET / HTTP/1.1\r\nDummy: x\nContent-Length: 3\r\n\r\nabc",  # a hidden length
        b"\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",  # a leading blank line
    ],
    ids=["request-line", "header", "end-of-head", "all", "hidden-length", "leading"],
)
def test_a_bare_lf_in_the_head_is_400(raw: bytes, split: int | None) -> None:
    assert refusal(raw, split=split) == 400


def test_a_bare_lf_is_refused_before_the_head_ends() -> None:
    parser = RequestParser()
    parser.feed(b"GET / HTTP/1.1\nHost: x")  # no end of head yet: a slow client could wait
    with pytest.raises(ParseError) as caught:
        parser.next_event()
    assert caught.value.status == 400


def test_a_crlf_head_with_lf_bytes_in_its_body_is_accepted() -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\na\nb\n"
    assert parse(raw, split=1)[1:] == [b"a\nb\n", END_OF_MESSAGE]


def test_bare_lf_line_ends_are_accepted_when_allowed() -> None:
    (head, _) = parse(b"GET /lf HTTP/1.1\nHost: x\nAccept: */*\n\n", allow_bare_lf=True)
    assert list(head.headers) == [("host", "x"), ("accept", "*/*")]


def test_mixed_crlf_and_lf_line_ends_are_accepted_when_allowed() -> None:
    raw = b"GET / HTTP/1.1\r\nHost: x\nAccept: */*\r\n\n"
    (head, _) = parse(raw, allow_bare_lf=True)
    assert list(head.headers) == [("host", "x"), ("accept", "*/*")]


def test_a_lenient_parser_does_not_teach_a_strict_one_a_bare_lf_head() -> None:
    # Both share the table of remembered heads: a bare-LF head must not be found there.
    raw = b"GET /shared HTTP/1.1\r\nHost: x\nX-A: 1\r\n\r\n"
    assert heads(parse(raw * 2, allow_bare_lf=True))
    assert refusal(raw) == 400


def test_absolute_form_target_is_routed_by_its_path() -> None:
    (head, _) = parse(
        b"GET http://example.com:8080/a%20b/c?d=e HTTP/1.1\r\nHost: example.com\r\n\r\n"
    )
    assert (head.target, head.path, head.query_string) == (
        "http://example.com:8080/a%20b/c?d=e",
        "/a%20b/c",
        "d=e",
    )


def test_absolute_form_without_path_means_root() -> None:
    (head, _) = parse(b"GET https://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert head.path == "/"


@pytest.mark.parametrize("rounds", [1, 2])  # the second round comes from the head cache
def test_absolute_form_authority_replaces_the_host_header(rounds: int) -> None:
    raw = b"GET http://a:8080/x HTTP/1.1\r\nAccept: */*\r\nHost: b\r\nX-Z: 1\r\n\r\n"
    for head in heads(parse(raw * rounds)):
        assert list(head.headers) == [("accept", "*/*"), ("host", "a:8080"), ("x-z", "1")]
        assert head.names["host"] == "a:8080"


def test_absolute_form_gives_an_http10_request_its_host() -> None:
    (head, _) = parse(b"GET http://a/x HTTP/1.0\r\n\r\n")
    assert list(head.headers) == [("host", "a")]


@pytest.mark.parametrize(
    "target",
    [b"http://a/x", b"http://[::1]:80/x", b"https://a.b-c_d~e:443", b"http://a:/x"],
)
def test_absolute_form_authorities_that_are_accepted(target: bytes) -> None:
    (head, _) = parse(b"GET " + target + b" HTTP/1.1\r\nHost: other\r\n\r\n")
    assert head.names["host"] == target.split(b"/")[2].decode()


@pytest.mark.parametrize(
    "request_line_and_headers",
    [
        b"GET http://a/x HTTP/1.1\r\n",  # HTTP/1.1 must still send Host
        b"GET http://a/x HTTP/1.1\r\nHost: a\r\nHost: a\r\n",
        b"GET http://user@a/x HTTP/1.1\r\nHost: a\r\n",  # userinfo
        b"GET http:///x HTTP/1.1\r\nHost: a\r\n",  # no host
        b"GET http://a:8o/x HTTP/1.1\r\nHost: a\r\n",  # not a port
        b'GET http://a"b/x HTTP/1.1\r\nHost: a\r\n',
    ],
)
def test_absolute_form_refusals_are_400(request_line_and_headers: bytes) -> None:
    assert refusal(request_line_and_headers + b"\r\n") == 400


def test_asterisk_form_is_accepted_for_options_only() -> None:
    (head, _) = parse(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.path == "*"
    assert refusal(b"GET * HTTP/1.1\r\nHost: x\r\n\r\n") == 400


def test_fragment_is_dropped_from_the_path() -> None:
    (head, _) = parse(b"GET /page#top HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.path == "/page"


def test_http10_needs_no_host() -> None:
    (head, _) = parse(b"GET / HTTP/1.0\r\n\r\n")
    assert head.version == "HTTP/1.0"


def test_expect_100_continue_is_flagged_only_when_a_body_follows() -> None:
    with_body = b"PUT / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n"
    without = b"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n"
    assert heads(parse(with_body))[0].expect_continue
    assert not heads(parse(without))[0].expect_continue


def test_identical_duplicate_content_length_is_accepted() -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"
    assert parse(raw)[1] == b"ok"


@pytest.mark.parametrize("split", [None, 1])
@pytest.mark.parametrize(
    "unfinished_head",
    [
        b"GET / HTTP/1.1\rHost: x",
        b"GET /a\rb HTTP/1.1\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r2",
        b"GET / HTTP/1.1\r\nHost: x\r\r",
    ],
)
def test_bare_cr_in_the_head_is_400_without_waiting_for_its_end(
    unfinished_head: bytes, split: int | None
) -> None:
    assert refusal(unfinished_head, split=split) == 400  # no eof: the head never ends


def test_a_head_ending_in_cr_waits_for_the_next_byte() -> None:
    parser = RequestParser()
    parser.feed(b"GET / HTTP/1.1\r\nHost: x\r")
    assert parser.next_event() is NEED_DATA
    parser.feed(b"\n\r\n")
    assert isinstance(parser.next_event(), RequestHead)


def test_clean_close_between_requests_is_closed_event() -> None:
    assert parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", eof=True)[-1] is CLOSED
    parser = RequestParser()
    parser.feed(b"")
    assert parser.next_event() is CLOSED


@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    ],
)
def test_close_in_the_middle_of_a_request_is_an_error(raw: bytes) -> None:
    assert refusal(raw, eof=True) == 400


# -- limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [None, 1000])
def test_header_section_over_limit_is_431(split: int | None) -> None:
    raw = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n"
    assert refusal(raw, split=split, max_header_size=1024) == 431


def test_incomplete_header_section_over_limit_is_431_without_waiting() -> None:
    raw = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 2000
    assert refusal(raw, max_header_size=1024) == 431


def test_header_section_limit_counts_leading_blank_lines() -> None:
    raw = b"\r\n" * 600 + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    assert refusal(raw, max_header_size=1024) == 431


def test_header_section_exactly_at_limit_is_accepted() -> None:
    base = b"GET / HTTP/1.1\r\nHost: x\r\nX-Fill: "
    fill = 1024 - len(base) - len(b"\r\n")
    raw = base + b"a" * fill + b"\r\n\r\n"
    assert heads(parse(raw, max_header_size=1024))


@pytest.mark.parametrize("split", [None, 500])
def test_long_target_is_414(split: int | None) -> None:
    raw = b"GET /" + b"a" * 3000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert refusal(raw, split=split, max_target_size=2048) == 414


def test_long_target_is_414_before_the_line_ends() -> None:
    assert refusal(b"GET /" + b"a" * 3000, max_target_size=2048) == 414


def test_content_length_over_limit_is_413_before_any_body() -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n"
    assert refusal(raw, max_body_size=1000) == 413


def test_chunked_body_over_limit_is_413_at_the_size_line() -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n" + b"a" * 512
    raw += b"\r\n300\r\n"
    assert refusal(raw, max_body_size=1000) == 413


def test_chunk_size_line_too_long_is_400() -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"e" * 2000
    assert refusal(raw) == 400


def test_trailer_section_is_bounded() -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
    raw += b"X-T: " + b"v" * 1000 + b"\r\n"
    raw += (b"X-More: " + b"v" * 1000 + b"\r\n") * 20
    assert refusal(raw, max_header_size=4096) == 431


def test_errors_are_sticky() -> None:
    parser = RequestParser()
    parser.feed(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
    for _ in range(2):
        with pytest.raises(ParseError):
            parser.next_event()


def test_byte_at_a_time_head_search_is_linear() -> None:
    """A slow sender must not make us rescan the whole buffer on every byte."""
    parser = RequestParser(max_header_size=64 * 1024)
    parser.feed(b"GET / HTTP/1.1\r\nHost: x\r\n")
    for _ in range(60_000):
        parser.feed(b"a")
        assert parser.next_event() is NEED_DATA
    assert parser._scan_from > 50_000


# -- corpus ---------------------------------------------------------------------------------------


def corpus(kind: str) -> list[Path]:
    return sorted((CORPUS / kind).glob("*.http"))


@pytest.mark.parametrize("path", corpus("valid"), ids=lambda p: p.stem)
@pytest.mark.parametrize("split", [None, 1])
def test_valid_corpus_parses(path: Path, split: int | None) -> None:
    expected_requests = int(path.stem.split("_", 1)[0])
    events = parse(path.read_bytes(), split=split)
    assert len(heads(events)) == expected_requests
    assert events.count(END_OF_MESSAGE) == expected_requests


@pytest.mark.parametrize("path", corpus("invalid"), ids=lambda p: p.stem)
@pytest.mark.parametrize("split", [None, 1])
def test_invalid_corpus_is_refused_with_its_status(path: Path, split: int | None) -> None:
    expected_status = int(path.stem.split("_", 1)[0])
    assert refusal(path.read_bytes(), split=split, max_body_size=1_000_000) == expected_status


def test_corpus_is_not_empty() -> None:
    assert len(corpus("valid")) >= 10 and len(corpus("invalid")) >= 30


# -- property: any split gives the same events ---------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_split_of_the_corpus_gives_the_same_events(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(corpus("valid")))
    raw = path.read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    parser = RequestParser()
    events: list = []
    last = 0
    for cut in [*cuts, len(raw)]:
        if cut > last:  # an empty feed would mean end of input
            parser.feed(raw[last:cut])
            last = cut
            events.extend(drain(parser))
    assert describe(merge_bodies(events)) == describe(parse(raw))


def test_cached_heads_still_obey_each_parsers_limits() -> None:
    raw = b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"
    roomy = RequestParser(max_body_size=10_000)
    roomy.feed(raw)
    assert heads([roomy.next_event()])  # parsed and remembered
    assert refusal(raw, max_body_size=1000) == 413  # same bytes, smaller limit
    long_target = b"GET /" + b"a" * 3000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert heads(parse(long_target))
    assert refusal(long_target, max_target_size=2048) == 414


def test_repeated_heads_give_equal_heads_whose_headers_read_the_same() -> None:
    raw = b"GET /again HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n" * 3
    first, second, third = heads(parse(raw))
    assert describe([first]) == describe([second]) == describe([third])
    assert list(third.headers) == [("host", "x"), ("x-a", "1")]


def test_cached_heads_still_obey_the_header_size_limit() -> None:
    raw = b"GET /big HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 600 + b"\r\n\r\n"
    assert heads(parse(raw))  # parsed and remembered
    assert refusal(raw, max_header_size=512) == 431


@pytest.mark.parametrize("rounds", [1, 2])
def test_a_bare_lf_head_ends_before_a_later_crlf_blank_line(rounds: int) -> None:
    # The second round meets the CRLF head already cached: the earlier, bare-LF blank line
    # must still end the first head there.
    raw = b"GET /lf HTTP/1.1\nHost: x\n\nGET /crlf HTTP/1.1\r\nHost: x\r\n\r\n"
    mixed = b"GET /mix HTTP/1.1\r\nHost: x\n\r\nGET /crlf HTTP/1.1\r\nHost: x\r\n\r\n"
    found = heads(parse(raw * rounds + mixed * rounds, allow_bare_lf=True))
    assert [h.path for h in found] == ["/lf", "/crlf"] * rounds + ["/mix", "/crlf"] * rounds


def test_heads_of_equal_length_alternating_are_each_parsed_as_sent() -> None:
    # The parser remembers the last head it met; one of the same length is not that head.
    one = b"GET /aa?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    two = b"GET /bb?x=2 HTTP/1.1\r\nHost: x\r\n\r\n"
    longer = b"GET /aa?x=1 HTTP/1.1\r\nHost: xy\r\n\r\n"
    found = heads(parse((one + two + one + longer) * 3))
    assert [(h.path, h.query_string) for h in found] == [
        ("/aa", "x=1"), ("/bb", "x=2"), ("/aa", "x=1"), ("/aa", "x=1")
    ] * 3  # fmt: skip
    assert [h.headers[0][1] for h in found[:4]] == ["x", "x", "x", "xy"]


def test_heads_fed_one_at_a_time_are_each_parsed_as_sent() -> None:
    # A keep-alive client's requests arrive one by one, each alone in the buffer: the parser
    # knows its last head by comparing the whole buffer, and must still tell the others apart.
    one = b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
    two = b"GET /two HTTP/1.1\r\nHost: x\r\n\r\n"
    body = b"POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"
    parser = RequestParser()
    events: list = []
    for piece in [one, one, two, two, one, body, one, one + one[:9], one[9:], one]:
        parser.feed(piece)
        events.extend(drain(parser))
    found = heads(events)
    assert [(h.method, h.path) for h in found] == [("GET", "/one")] * 2 + [("GET", "/two")] * 2 + [
        ("GET", "/one"),
        ("POST", "/one"),
    ] + [("GET", "/one")] * 4
    assert found[0] is found[1] and found[2] is found[3]  # the same immutable head again
    assert b"ok" in events


def test_a_repeated_head_fed_alone_still_obeys_a_smaller_header_limit() -> None:
    raw = b"GET /big HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 600 + b"\r\n\r\n"
    roomy = RequestParser()
    for _ in range(2):
        roomy.feed(raw)
        assert heads(drain(roomy))
    strict = RequestParser(max_header_size=512)  # shares the cached head with `roomy`
    strict.feed(raw)
    with pytest.raises(ParseError) as caught:
        drain(strict)
    assert caught.value.status == 431


# -- methods and Host ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PROPFIND", "REPORT", "MKCOL", "PURGE", "get", "X-Custom_1"])
def test_any_token_method_is_parsed_for_routing_to_decide(method: str) -> None:
    (head, _) = parse(f"{method} /dav HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert head.method == method


@pytest.mark.parametrize("method", [b"GE(T", b"G\x01T", b"GET\xff", b"[GET]"])
def test_a_method_that_is_not_a_token_is_400(method: bytes) -> None:
    assert refusal(method + b" / HTTP/1.1\r\nHost: x\r\n\r\n") == 400


@pytest.mark.parametrize(
    "host",
    [
        "example.com", "example.com:8080", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:443",
        "[2001:db8::7]", "xn--bcher-kva.example", "a%20b", "localhost:", "", "[v1.fe]",
    ],
)  # fmt: skip
def test_a_host_that_is_a_valid_authority_is_accepted(host: str) -> None:
    (head, _) = parse(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert dict(head.headers)["host"] == host


@pytest.mark.parametrize(
    "host",
    [
        "a b", "evil.com/x?@a", "user@example.com", "example.com/", "exa mple", "a\"b", "a<b>",
        "[::1", "::1", "[zz::1]", "[::1]x", "a:b", "a:80:80", "a:123456", "%zz", "a%2",
        "a\\b", "a#b", "a?b", ":80", "{a}", "a|b", "a^b", "a\tb",
    ],
)  # fmt: skip
def test_a_host_that_is_not_a_valid_authority_is_400(host: str) -> None:
    raw = f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    assert refusal(raw) == 400
    assert refusal(raw, split=1) == 400


def test_an_http10_request_without_host_is_still_accepted() -> None:
    (head, _) = parse(b"GET / HTTP/1.0\r\n\r\n")
    assert head.version == "HTTP/1.0"


@pytest.mark.parametrize("split", [None, 1])
def test_a_stray_crlf_after_a_body_then_the_close_is_no_request(split: int | None) -> None:
    raw = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\r\n"
    events = parse(raw, split=split, eof=True)
    assert describe(events)[1:] == [b"abc", END_OF_MESSAGE, CLOSED]


@pytest.mark.parametrize("after", [b"0", b"X\r\n", b"\n"])
def test_chunk_data_followed_by_anything_but_cr_is_refused_at_once(after: bytes) -> None:
    # No need to wait for a whole line: the byte after the data must be CR.
    assert refusal(CHUNKED_HEAD + b"5\r\nABCDE" + after) == 400
