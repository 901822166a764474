"""`WireMeter`: the bytes each connection moved on the wire, as the kernel counted them.

Theory of operation. The kernel keeps byte counters on every TCP socket (`TCP_INFO`): the
bytes it received in order, the bytes it transmitted (retransmissions among them, counted
apart) and the bytes written to it but not transmitted yet. Reading them costs one system
call per connection and nothing per request, so the meter reads every open connection once a
sample (the metrics sampler's second), adds what grew since its last look to
`socketify_bytes_total`, and looks a last time when the acceptor lets a connection go, which
it does before the socket closes. What is counted is what the kernel moved for us: HTTP
framing, HTTP/2 frames, WebSocket frames and TLS records included; TCP/IP headers, the TCP
handshake and retransmitted copies not. A received FIN counts one byte, as it takes one in
the kernel's count.

Connections on a Unix socket have no TCP counters and are not counted; a kernel whose
`TCP_INFO` is too short to hold them (before Linux 4.1) counts nothing, and one that lacks
the transmitted-bytes counter (before 4.19) counts outgoing bytes once the peer acknowledges
them. A worker killed outright loses what its connections moved since the last sample.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import Any

from socketify.metrics.builtin import BYTES
from socketify.metrics.recorder import Recorder

__all__ = ["WireMeter", "tcp_info_bytes", "wire_bytes"]

_INFO_SIZE = 256  # more than the kernel's struct tcp_info holds today; it returns its own size
# Offsets in struct tcp_info (include/uapi/linux/tcp.h), each with the length that holds it.
_ACKED_RECEIVED = struct.Struct("=QQ")  # tcpi_bytes_acked, tcpi_bytes_received
_AT_ACKED, _HAS_RECEIVED = 120, 136
_NOT_SENT = struct.Struct("=I")  # tcpi_notsent_bytes
_AT_NOT_SENT = 144
_SENT_RETRANS = struct.Struct("=QQ")  # tcpi_bytes_sent, tcpi_bytes_retrans
_AT_SENT, _HAS_SENT = 200, 216
_TCP = (socket.AF_INET, socket.AF_INET6)
_NOT_COUNTED = (-1, -1)


def wire_bytes(sock: Any) -> tuple[int, int] | None:
    """(received, sent) bytes of the TCP socket `sock` so far; None if the kernel cannot say.

    Sent means written by us and taken by the kernel: transmitted once (a copy sent again
    is not counted twice) or still queued to go.
    """
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_SIZE)
    except OSError:  # closed already, or no TCP socket
        return None
    return tcp_info_bytes(info)


def tcp_info_bytes(info: bytes) -> tuple[int, int] | None:
    """(received, sent) from a `TCP_INFO` struct, as long as this kernel makes it."""
    size = len(info)
    if size < _HAS_RECEIVED:
        return None
    acked, received = _ACKED_RECEIVED.unpack_from(info, _AT_ACKED)
    if size < _HAS_SENT:
        # On an accepted socket the acknowledged bytes are data only (a connecting one's
        # count would include its SYN).
        return received, acked
    sent, retransmitted = _SENT_RETRANS.unpack_from(info, _AT_SENT)
    (queued,) = _NOT_SENT.unpack_from(info, _AT_NOT_SENT)
    return received, sent - retransmitted + queued


class WireMeter:
    """Adds the bytes connections moved to `socketify_bytes_total{direction}`."""

    def __init__(self, recorder: Recorder) -> None:
        self._cells = recorder.cells
        # Made now, so the series show (at 0) before the first connection.
        self._in = recorder.cell(BYTES, ("in",))
        self._out = recorder.cell(BYTES, ("out",))
        # Per connection, the counts of its last look; `_NOT_COUNTED` for one the kernel counts
        # nothing for (a Unix socket), so it is not asked again.
        self._seen: dict[Any, tuple[int, int]] = {}

    def look_all(self, connections: Iterable[Any]) -> None:
        """Count what each of `connections` moved since the last look (the sampler's tick)."""
        for conn in connections:
            self.look(conn)

    def look(self, conn: Any) -> None:
        """Count what `conn` (anything with a `sock`) moved since the last look at it."""
        seen = self._seen
        sock = conn.sock
        last = seen.get(conn)
        if last is None:  # its first look: is it a TCP connection at all?
            if sock.family not in _TCP:
                seen[conn] = _NOT_COUNTED
                return
            last = (0, 0)
        elif last[0] < 0:
            return
        now = wire_bytes(sock)
        # None: e.g. closed already, the counts of the last look stand. Equal: idle since.
        if now is None or now == last:
            return
        received, sent = max(now[0], last[0]), max(now[1], last[1])
        self._cells[self._in] += received - last[0]
        self._cells[self._out] += sent - last[1]
        seen[conn] = (received, sent)

    def last_look(self, conn: Any) -> None:
        """Count what `conn` moved since the last look, and forget it (it is closing)."""
        self.look(conn)
        self._seen.pop(conn, None)
