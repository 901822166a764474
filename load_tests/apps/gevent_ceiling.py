"""A parser-free gevent /ping server: the ceiling for any gevent server on this machine.

Theory of operation: it never parses HTTP. Each connection greenlet counts request terminators
(CRLF CRLF) in what it has read and answers each one with the same pre-built keep-alive
response, so pipelined requests still get exactly one response each. Whatever is left after the
last terminator is the start of the next request and is kept. This is only correct for requests
without a body, such as wrk's GETs, which is all it is for. The Date header is fixed at start-up.

`python -m load_tests.apps.gevent_ceiling --bind 127.0.0.1:8080 --workers 2` binds once, then
forks the extra workers, which all accept on the inherited socket.
"""

from __future__ import annotations

import argparse
import contextlib
from email.utils import formatdate

import gevent
from gevent.server import StreamServer
from gevent.socket import socket

TERMINATOR = b"\r\n\r\n"
MAX_PENDING = 64 * 1024
BODY = b'{"ok":true}'
RESPONSE = (
    "HTTP/1.1 200 OK\r\n"
    f"Date: {formatdate(usegmt=True)}\r\n"
    "Server: gevent-ceiling\r\n"
    "Content-Type: application/json\r\n"
    f"Content-Length: {len(BODY)}\r\n"
    "Connection: keep-alive\r\n"
    "\r\n"
).encode() + BODY


def handle(sock: socket, _address: tuple[str, int]) -> None:
    """Answer every complete request head on this connection until the peer closes."""
    pending = b""
    with contextlib.suppress(ConnectionError):
        while data := sock.recv(65536):
            pending += data
            if count := pending.count(TERMINATOR):
                sock.sendall(RESPONSE * count)
                pending = pending[pending.rindex(TERMINATOR) + len(TERMINATOR) :]
            elif len(pending) > MAX_PENDING:
                return


def main() -> None:
    """Bind, fork the extra workers, and serve forever in each process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:8080", help="HOST:PORT")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    host, _, port = args.bind.rpartition(":")
    server = StreamServer((host, int(port)), handle, backlog=2048)
    server.init_socket()
    for _ in range(args.workers - 1):
        if gevent.fork() == 0:
            break
    server.serve_forever()


if __name__ == "__main__":
    main()
