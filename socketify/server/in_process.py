"""One connection served in this process and thread, for `TestClient` upgrades.

The connection runs the real `Connection` code (parser limits, upgrade hand-over, the
`Outbound` writer, close handshakes) in a greenlet on one end of a socket pair; the caller
talks on the other end through gevent's cooperative socket, so the two take turns on this
thread's hub. No listener, no port, no worker process.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from gevent import socket as cooperative

from socketify.server.acceptor import plain_socket
from socketify.server.connection import Connection
from socketify.server.service import HttpService

if TYPE_CHECKING:
    from socketify.core.application import Application

__all__ = ["open_connection"]


def open_connection(app: Application, remote_addr: str) -> Any:
    """A cooperative client socket whose peer is a connection served by `app`."""
    service = HttpService(app, [])
    ours, theirs = socket.socketpair()
    # The plain socket class, non-blocking, as the accept loop hands them to connections.
    raw = plain_socket(ours.family, ours.type, ours.proto, ours.detach())
    service.adopt(Connection(service, raw, remote_addr))
    return cooperative.socket(fileno=theirs.detach())
