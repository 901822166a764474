"""`WireMeter` on real loopback sockets: the kernel's counts, added once each."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from socketify.metrics.builtin import BYTES
from socketify.metrics.recorder import Recorder
from socketify.server.wire_meter import WireMeter, tcp_info_bytes, wire_bytes
from tests.support.wait import wait_for
from workers.shared.tally import TallyTable


@dataclass(eq=False)
class Served:
    """A connection as the acceptor knows it: something with a `sock`."""

    sock: Any


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(ours, theirs): two ends of one loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname(), timeout=5)
        ours, _ = listener.accept()
    ours.settimeout(5)
    with ours, theirs:
        yield ours, theirs


def receive(sock: socket.socket, size: int) -> None:
    """Read exactly `size` bytes (the kernel then counted them on both ends)."""
    while size:
        size -= len(sock.recv(size))


def totals(recorder: Recorder) -> tuple[float, float]:
    cells = recorder.cells
    return cells[recorder.cell(BYTES, ("in",))], cells[recorder.cell(BYTES, ("out",))]


def test_wire_bytes_are_what_each_end_received_and_sent(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    theirs.sendall(b"q" * 70_000)
    receive(ours, 70_000)
    ours.sendall(b"a" * 3_000)
    receive(theirs, 3_000)
    assert wire_bytes(ours) == (70_000, 3_000)
    assert wire_bytes(theirs) == (3_000, 70_000)


def test_bytes_written_but_not_yet_sent_count_as_sent(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _theirs = pair
    ours.setblocking(False)
    written = 0
    try:
        while True:  # until the peer's window and our send buffer are full
            written += ours.send(b"x" * 65536)
    except BlockingIOError:
        pass
    assert wire_bytes(ours) == (0, written)


def test_an_older_kernels_shorter_tcp_info_counts_what_it_holds(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    theirs.sendall(b"q" * 2_000)
    receive(ours, 2_000)
    ours.sendall(b"a" * 700)
    receive(theirs, 700)
    info = ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    assert tcp_info_bytes(info) == (2_000, 700)
    # Before Linux 4.19 (no bytes_sent): what the peer acknowledged, which all of it was.
    wait_for(
        lambda: (
            tcp_info_bytes(ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 200))
            == (2_000, 700)
        ),
        timeout=5,
        message="the peer to acknowledge our bytes",
    )
    # Before 4.1 (no bytes_received): nothing to count.
    assert tcp_info_bytes(info[:128]) is None


def test_a_meter_adds_only_what_grew_since_its_last_look(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    recorder = Recorder(TallyTable(capacity=1).writer(0))
    meter = WireMeter(recorder)
    conn = Served(ours)
    assert totals(recorder) == (0, 0)
    theirs.sendall(b"q" * 1_000)
    receive(ours, 1_000)
    meter.look_all([conn])
    meter.look_all([conn])
    assert totals(recorder) == (1_000, 0)
    ours.sendall(b"a" * 500)
    receive(theirs, 500)
    theirs.sendall(b"q" * 20)
    receive(ours, 20)
    meter.last_look(conn)
    assert totals(recorder) == (1_020, 500)


def test_a_closed_socket_keeps_what_was_counted_and_adds_nothing(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    recorder = Recorder(TallyTable(capacity=1).writer(0))
    meter = WireMeter(recorder)
    conn = Served(ours)
    theirs.sendall(b"q" * 300)
    receive(ours, 300)
    meter.look(conn)  # as the acceptor's close_all does, before it closes
    ours.close()
    meter.last_look(conn)  # the connection's own forget, after the close
    meter.last_look(conn)
    assert totals(recorder) == (300, 0)


def test_unix_socket_connections_are_not_counted() -> None:
    recorder = Recorder(TallyTable(capacity=1).writer(0))
    meter = WireMeter(recorder)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"q" * 100)
        receive(ours, 100)
        assert wire_bytes(ours) is None
        meter.last_look(Served(ours))
    assert totals(recorder) == (0, 0)
