"""Sending a file range: `sendfile` on plain TCP, read-and-send under TLS."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from gevent import get_hub

from socketify.server.errors import PeerGone

if TYPE_CHECKING:
    from socketify.server.connection import Connection

__all__ = ["send_file"]


def send_file(conn: Connection, path: str, offset: int, length: int) -> None:
    if conn.scheme == "https":
        _copy_file(conn, path, offset, length)  # sendfile would bypass the encryption
        return
    hub = get_hub()
    out_fd = conn.sock.fileno()
    idle = conn.service.options.idle_timeout
    with open(path, "rb") as file:
        in_fd = file.fileno()
        while length > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, min(length, 1 << 20))
            except BlockingIOError:
                conn.deadline = time.monotonic() + idle
                hub.wait(conn.write_watcher)
                continue
            except OSError as exc:
                raise PeerGone(exc) from exc
            if sent == 0:
                raise PeerGone("file shrank while it was being sent")
            offset += sent
            length -= sent


def _copy_file(conn: Connection, path: str, offset: int, length: int) -> None:
    with open(path, "rb") as file:
        file.seek(offset)
        while length > 0:
            chunk = file.read(min(length, 65536))
            if not chunk:
                raise PeerGone("file shrank while it was being sent")
            conn._send(chunk)
            length -= len(chunk)
