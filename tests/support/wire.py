"""`wire_bytes`: a Response as a connection writes it, without a socket."""

from __future__ import annotations

from socketify.core.response import Response
from socketify.protocol.http11 import RequestHead, ServerConnection
from socketify.server.exchange import FileRange, response_parts

__all__ = ["wire_bytes"]


def wire_bytes(
    res: Response, *, keep_alive: bool = True, method: str | None = None, version: str = "HTTP/1.1"
) -> bytes:
    """`res` as a connection writes it for a `method` request (file ranges read from disk).

    The method defaults to HEAD for a response made for a HEAD request, else GET.
    """
    method = method or ("HEAD" if res.head_only else "GET")
    conn = ServerConnection()
    conn.receive_data(f"{method} / {version}\r\nHost: x\r\n\r\n".encode())
    head = conn.next_event()
    assert isinstance(head, RequestHead)
    parts = []
    for part in response_parts(conn, head, res, keep_alive):
        if isinstance(part, FileRange):
            with open(part.path, "rb") as file:
                file.seek(part.offset)
                part = part.head + file.read(part.length)
        parts.append(part)
    return b"".join(parts)
