"""Raw TCP services served by the same pre-fork master and gevent workers as HTTP apps.

    from socketify import tcp

    def echo(conn: tcp.StreamConnection) -> None:
        for line in tcp.lines(conn, keepends=True):
            conn.send(line)

    service = tcp.Service(echo, idle_timeout=60)

`socketify run module:service` serves it: a handler runs in its own greenlet per connection
and reads and writes in blocking style. Reads are bounded (`readline` raises `LineTooLong`,
`frames` raises `FrameTooLarge`), an idle connection is closed after `idle_timeout`, and a
graceful stop lets handlers finish for up to `graceful_timeout`.
"""

from __future__ import annotations

from socketify.tcp.bundle import Bundle
from socketify.tcp.connection import StreamConnection, TlsInfo
from socketify.tcp.errors import (
    FrameTooLarge,
    IdleTimeout,
    IncompleteRead,
    LineTooLong,
    StreamError,
)
from socketify.tcp.framing import frames, lines, pack_frame
from socketify.tcp.service import Service, ServiceOptions

__all__ = [
    "Bundle",
    "FrameTooLarge",
    "IdleTimeout",
    "IncompleteRead",
    "LineTooLong",
    "Service",
    "ServiceOptions",
    "StreamConnection",
    "StreamError",
    "TlsInfo",
    "frames",
    "lines",
    "pack_frame",
]
