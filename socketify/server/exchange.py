"""One request answered over HTTP/1.1, without IO: the seam between the wire and the app.

Theory of operation. The gevent connection and `TestClient` answer a request the same way, and
only their IO differs, so the steps live here once:

1. `request_for(conn, head, ...)`: the `Request` for a head the `ServerConnection` parsed, with
   a `RequestBody` that reads the body only when the app asks (the owner's `wait` receives
   more bytes when the parser needs them);
2. the owner runs `app.handle(req, res)` and, when there is a body, `body.settle(status)`;
3. `response_parts(conn, head, res, keep_alive)`: what to write, in order — bytes, or a `FileRange`
   (the head and a file's range, which a socket sends with sendfile). A stream's chunks are
   produced as the owner writes them, so a slow producer never makes the answer wait whole,
   and its trailer fields, read once the stream is exhausted, end the chunked body.

Everything about the wire (framing, HEAD, keep-alive, chunking) is the `ServerConnection`'s;
everything about the answer is the `Response`'s public surface. An HTTP/2 connection answers
with the same Request, Response and app, writing the answer as frames instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from socketify.core.request import Request
from socketify.core.response import Response
from socketify.protocol.http11 import HeaderField, RequestHead, ServerConnection
from socketify.protocol.proxy_header import ProxyHeader
from socketify.server.request_body import RequestBody

__all__ = ["FileRange", "request_for", "response_parts"]


@dataclass(frozen=True, slots=True)
class FileRange:
    """The response head, then `length` bytes of the file at `path` from `offset`."""

    head: bytes
    path: str
    offset: int
    length: int


def request_for(
    conn: ServerConnection,
    head: RequestHead,
    wait: Callable[[RequestBody], object],
    remote_addr: str,
    trust_proxy: bool = False,
    scheme: str = "http",
    client_cert: dict[str, Any] | None = None,
    proxy_header: ProxyHeader | None = None,
    server_name: str | None = None,
) -> tuple[Request, RequestBody | None]:
    """The request for `head` and its unread body (None when it has none)."""
    if head.chunked or head.content_length:
        body = RequestBody(conn, head, wait)
        req = Request(head, body, remote_addr, trust_proxy, scheme)
    else:
        conn.next_event()  # the END_OF_MESSAGE of a request without a body
        body = None
        req = Request(head, b"", remote_addr, trust_proxy, scheme)
    if client_cert is not None:
        req.client_cert = client_cert
    if proxy_header is not None:
        req.proxy_header = proxy_header
    if server_name is not None:
        req.server_name = server_name
    return req, body


def response_parts(
    conn: ServerConnection, req_head: RequestHead, res: Response, keep_alive: bool = True
) -> Iterable[bytes | FileRange]:
    """What to write for `res`, in order; `conn.keep_alive` says what follows once written.

    A buffered answer is one piece, head and body. An upgrade answer is its head only: the
    owner then hands the connection to `res.upgrade`.
    """
    if res.upgrade is None and res.file_path is None and res.stream_iter is None:
        return (conn.respond(req_head, res.status_code, res.fields(), res.body, keep_alive),)
    head = conn.start_response(
        req_head,
        res.status_code,
        res.fields(),
        length=res.body_length,
        upgrade=res.upgrade is not None,
        keep_alive=keep_alive,
    )
    if not conn.sends_body:  # HEAD, 1xx, 204, 304, an upgrade
        return (head + conn.end_response(),)
    return _produced(conn, res, head)


def _produced(conn: ServerConnection, res: Response, head: bytes) -> Iterator[bytes | FileRange]:
    """A file or stream answer, its chunks encoded as the producer yields them."""
    if res.file_path is not None:
        yield FileRange(head, res.file_path, res.file_offset, res.file_length)
        trailers: tuple[HeaderField, ...] = ()
    else:
        yield head
        for chunk in res.iter_stream():
            yield conn.send_data(chunk)
        trailers = res.trailer_fields()  # only now: the iterable may have set them as it ran
    end = conn.end_response(trailers)
    if end:
        yield end
