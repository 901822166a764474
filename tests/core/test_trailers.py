"""Trailers in the core: `req.trailers` once the body ended, `res.set_trailer` on a stream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from socketify import Response
from socketify.core.body_stream import BodyStream
from tests.support.handle import build_request


class TrailingBody(BodyStream):
    """A streamed body whose trailers arrive with its end, as a connection's do."""

    def __init__(self, pieces: list[bytes], trailers: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self._pieces_left = list(pieces)
        self._trailers_at_end = trailers

    def next_piece(self) -> bytes:
        if self._pieces_left:
            return self._pieces_left.pop(0)
        self.trailers = self._trailers_at_end
        return b""


def test_a_request_without_a_body_has_no_trailers() -> None:
    req = build_request("GET", "/")
    assert dict(req.trailers) == {}


def test_trailers_read_the_body_when_nothing_has() -> None:
    body = TrailingBody([b"ab", b"cd"], (("x-sum", "4"),))
    req = build_request("POST", "/", body=body)
    assert req.trailers["X-Sum"] == "4"
    assert req.body == b"abcd"


def test_trailers_are_there_once_iter_body_has_run_out() -> None:
    req = build_request("POST", "/", body=TrailingBody([b"ab", b"cd"], (("x-sum", "4"),)))
    pieces = req.iter_body()
    assert next(pieces) == b"ab"
    with pytest.raises(RuntimeError, match="the trailers follow the body"):
        req.trailers  # noqa: B018
    assert list(pieces) == [b"cd"]
    assert req.trailers.getall("x-sum") == ["4"]


def test_trailers_are_read_only() -> None:
    req = build_request("POST", "/", body=TrailingBody([b"x"], (("x-sum", "1"),)))
    with pytest.raises(TypeError):
        req.trailers["x-sum"] = "2"


def test_a_streamed_body_of_plain_pieces_ends_with_no_trailers() -> None:
    req = build_request("POST", "/", body=iter([b"a", b"b"]))
    assert req.body == b"ab" and dict(req.trailers) == {}


def stream_with_trailers(res: Response) -> Iterator[bytes]:
    yield b"a"
    res.set_trailer("X-Late", "2")


def test_set_trailer_records_fields_and_announces_those_set_before_the_head() -> None:
    res = Response()
    res.set_trailer("X-Early", "1").set_trailer("X-Early", "one")
    res.stream(stream_with_trailers(res))
    assert ("trailer", "Trailer", "X-Early", "Trailer: X-Early\r\n") in res.fields()
    assert b"".join(res.iter_stream()) == b"a"
    assert [(f[0], f[2]) for f in res.trailer_fields()] == [("x-early", "one"), ("x-late", "2")]
    assert res.trailers["X-LATE"] == "2"


def test_a_trailer_header_of_the_handlers_own_is_kept() -> None:
    res = Response()
    res.set_header("Trailer", "X-Digest")
    res.set_trailer("X-Count", "1")
    res.stream(iter([b"a"]))
    assert [f[2] for f in res.fields() if f[0] == "trailer"] == ["X-Digest"]


def test_a_buffered_answer_announces_no_trailers_and_refuses_new_ones() -> None:
    res = Response()
    res.set_trailer("X-Early", "1")
    res.send("body")
    assert not [f for f in res.fields() if f[0] == "trailer"]
    with pytest.raises(RuntimeError, match="trailers follow a streamed body"):
        res.set_trailer("X-Late", "2")


@pytest.mark.parametrize("name", ["Content-Length", "Content-Type", "Host", "Set-Cookie", "TE"])
def test_set_trailer_refuses_fields_no_trailer_may_carry(name: str) -> None:
    with pytest.raises(ValueError, match="must not be sent as a trailer"):
        Response().set_trailer(name, "x")


def test_set_trailer_refuses_values_that_would_split_the_message() -> None:
    with pytest.raises(ValueError):
        Response().set_trailer("X-A", "1\r\nX-B: 2")


def test_an_error_answer_drops_the_trailers_set_before() -> None:
    res = Response()
    res.set_trailer("X-Early", "1")
    res.reset_for_error()
    assert res.trailer_fields() == ()
