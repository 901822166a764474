"""The peer of the TCP echo benchmark: gevent's own StreamServer echoing bytes back.

    python load_tests/apps/tcp_echo_gevent.py PORT

No framing and no buffering: each read is sent straight back, the least work a gevent echo
server can do per message.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

from gevent.server import StreamServer  # noqa: E402


def echo(sock, address):  # type: ignore[no-untyped-def]
    """Send every read back until the client closes."""
    recv, sendall = sock.recv, sock.sendall
    try:
        while data := recv(65536):
            sendall(data)
    except ConnectionResetError:
        pass  # the load generator closes with echoes unread: a reset, not a failure


if __name__ == "__main__":
    StreamServer(("127.0.0.1", int(sys.argv[1])), echo, backlog=2048).serve_forever()
