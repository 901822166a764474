"""StreamConnection and the framing helpers over a real socket pair (no server)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from socketify import tcp


@pytest.fixture
def pair() -> Iterator[tuple[tcp.StreamConnection, socket.socket]]:
    """(the server's StreamConnection, the client's socket), both blocking, 5 s timeout."""
    ours, theirs = socket.socketpair()
    ours.settimeout(5)
    theirs.settimeout(5)
    conn = tcp.StreamConnection(ours, ("peer", 1), max_line=16)
    yield conn, theirs
    conn.close()
    theirs.close()


def test_readline_joins_a_line_split_across_reads(pair) -> None:
    conn, client = pair
    client.sendall(b"hel")
    threading.Timer(0.05, client.sendall, [b"lo\nnext\n"]).start()
    assert conn.readline() == b"hello\n"
    assert conn.readline() == b"next\n"


def test_readline_returns_the_unterminated_rest_then_empty_at_end(pair) -> None:
    conn, client = pair
    client.sendall(b"a\ntail")
    client.shutdown(socket.SHUT_WR)
    assert [conn.readline(), conn.readline(), conn.readline()] == [b"a\n", b"tail", b""]


def test_a_line_of_exactly_the_bound_is_accepted(pair) -> None:
    conn, client = pair
    client.sendall(b"x" * 15 + b"\n")
    assert conn.readline() == b"x" * 15 + b"\n"


def test_a_line_over_the_bound_raises_line_too_long(pair) -> None:
    conn, client = pair
    client.sendall(b"x" * 16 + b"\n")
    with pytest.raises(tcp.LineTooLong, match="longer than 16 bytes"):
        conn.readline()


def test_an_endless_line_fails_without_waiting_for_its_newline(pair) -> None:
    conn, client = pair
    client.sendall(b"y" * 40)  # no newline ever comes: the bound must trip on what arrived
    with pytest.raises(tcp.LineTooLong):
        conn.readline(max_line=32)


def test_recv_drains_what_readline_read_ahead_first(pair) -> None:
    conn, client = pair
    client.sendall(b"line\nrest")
    assert conn.readline() == b"line\n"
    assert conn.recv(2) == b"re"
    assert conn.recv() == b"st"


def test_recv_exactly_waits_for_every_byte(pair) -> None:
    conn, client = pair
    client.sendall(b"abc")
    threading.Timer(0.05, client.sendall, [b"defg"]).start()
    assert conn.recv_exactly(6) == b"abcdef"
    assert conn.recv() == b"g"


def test_recv_exactly_raises_incomplete_read_with_the_partial_bytes(pair) -> None:
    conn, client = pair
    client.sendall(b"abc")
    client.shutdown(socket.SHUT_WR)
    with pytest.raises(tcp.IncompleteRead) as caught:
        conn.recv_exactly(10)
    assert caught.value.partial == b"abc" and caught.value.expected == 10


def test_lines_strips_lf_and_crlf_unless_keepends(pair) -> None:
    conn, client = pair
    client.sendall(b"one\r\ntwo\nthree")
    client.shutdown(socket.SHUT_WR)
    assert list(tcp.lines(conn)) == [b"one", b"two", b"three"]


def test_lines_keepends(pair) -> None:
    conn, client = pair
    client.sendall(b"one\r\ntwo\n")
    client.shutdown(socket.SHUT_WR)
    assert list(tcp.lines(conn, keepends=True)) == [b"one\r\n", b"two\n"]


def test_frames_round_trip_with_every_prefix_size(pair) -> None:
    conn, client = pair
    for prefix in (1, 2, 4, 8):
        client.sendall(
            tcp.pack_frame(b"payload", prefix=prefix) + tcp.pack_frame(b"", prefix=prefix)
        )
        received = tcp.frames(conn, prefix=prefix)
        assert [next(received), next(received)] == [b"payload", b""]


def test_frames_end_cleanly_when_the_peer_closes_between_frames(pair) -> None:
    conn, client = pair
    client.sendall(tcp.pack_frame(b"a") + tcp.pack_frame(b"bc"))
    client.shutdown(socket.SHUT_WR)
    assert list(tcp.frames(conn)) == [b"a", b"bc"]


def test_frames_raise_incomplete_read_when_the_peer_closes_inside_one(pair) -> None:
    conn, client = pair
    client.sendall(tcp.pack_frame(b"abcdef")[:-2])
    client.shutdown(socket.SHUT_WR)
    with pytest.raises(tcp.IncompleteRead):
        list(tcp.frames(conn))


def test_frames_refuse_a_length_over_the_bound_before_reading_it(pair) -> None:
    conn, client = pair
    client.sendall((1 << 30).to_bytes(4, "big"))
    with pytest.raises(tcp.FrameTooLarge, match="1073741824 bytes over the 1024-byte limit"):
        next(tcp.frames(conn, max_size=1024))


def test_pack_frame_refuses_a_payload_its_prefix_cannot_count() -> None:
    with pytest.raises(ValueError, match="does not fit a 1-byte length"):
        tcp.pack_frame(b"x" * 256, prefix=1)
    with pytest.raises(ValueError, match="prefix must be one of"):
        tcp.pack_frame(b"x", prefix=3)


def test_send_and_close(pair) -> None:
    conn, client = pair
    conn.send(b"z" * 100_000)
    received = b""
    while len(received) < 100_000:
        received += client.recv(65536)
    conn.close()
    conn.close()  # twice is fine
    assert conn.closed and client.recv(10) == b""


def test_service_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_line must be an int >= 1"):
        tcp.Service(print, max_line=0)
    with pytest.raises(ValueError, match="idle_timeout must be > 0"):
        tcp.Service(print, idle_timeout=0)
    with pytest.raises(TypeError):
        tcp.Service(print, nonsense=1)
    with pytest.raises(TypeError, match="handler must be callable"):
        tcp.Service("not callable")  # type: ignore[arg-type]
