"""A raw HTTP/1.1 client on a plain socket: the bytes a test writes, the responses as framed.

    with connect(server.address) as sock:
        sock.sendall(request_bytes("POST", "/echo", body=b"hi") + request_bytes("GET", "/ping"))
        reader = Reader(sock)
        assert reader.read_response().body == b"hi"
        assert reader.read_response().body == b"pong"

Pipelining, interim 100s, chunked framing and close-delimited bodies are all visible exactly
as the server sent them; `get()` is one request on a fresh connection. An address is
`(host, port)` or a Unix socket path; with `tls` (a client `SSLContext`) the socket is
wrapped after connecting.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Address", "Reader", "WireResponse", "connect", "get", "request_bytes"]

Address = tuple[str, int] | str  # (host, port) or a Unix socket path


def connect(
    address: Address,
    timeout: float = 5.0,
    *,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
) -> socket.socket:
    """A blocking client socket connected to `address` (TLS handshake done with `tls`)."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
        if tls is not None:
            hostname = server_hostname or (None if isinstance(address, str) else address[0])
            return tls.wrap_socket(sock, server_hostname=hostname)
    except BaseException:
        sock.close()
        raise
    return sock


@dataclass
class WireResponse:
    """One response as read from the socket."""

    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; repeats joined with ", "
    body: bytes
    chunks: list[bytes] = field(default_factory=list)  # chunk payloads, if chunked
    trailers: dict[str, str] = field(default_factory=dict)  # after a chunked body, like headers
    complete: bool = True  # False: the body was cut short (EOF before its declared end)

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        return self.headers.get(name.lower())

    @property
    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode()


class Reader:
    """Reads HTTP responses from a socket, one after another (pipelining-aware)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.eof = False

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                return line
            if not self._fill():
                raise EOFError("connection closed inside a response head")

    def _exact(self, count: int) -> bytes | None:
        while len(self.buf) < count:
            if not self._fill():
                return None
        data = bytes(self.buf[:count])
        del self.buf[:count]
        return data

    def read_head(self) -> WireResponse:
        """Read a status line and headers (an interim 1xx counts as a response)."""
        line = self._line()
        version, _, rest = line.decode("latin-1").partition(" ")
        if not version.startswith("HTTP/"):
            raise AssertionError(f"not a status line: {line!r}")
        code, _, reason = rest.partition(" ")
        headers: dict[str, str] = {}
        while True:
            line = self._line()
            if not line:
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return WireResponse(int(code), reason, headers, b"")

    def read_response(self, *, head_request: bool = False) -> WireResponse:
        """Read one final response, body included (framing as the headers say)."""
        res = self.read_head()
        if head_request or res.status in (204, 304) or 100 <= res.status < 200:
            return res
        if res.header("transfer-encoding") == "chunked":
            self._read_chunked(res)
        elif res.header("content-length") is not None:
            length = int(res.headers["content-length"])
            body = self._exact(length)
            if body is None:
                res.body, res.complete = bytes(self.buf), False
                self.buf.clear()
            else:
                res.body = body
        else:  # close-delimited
            while self._fill():
                pass
            res.body = bytes(self.buf)
            self.buf.clear()
        return res

    def _read_chunked(self, res: WireResponse) -> None:
        while True:
            try:
                size = int(self._line().split(b";")[0], 16)
            except EOFError:
                res.complete = False
                break
            if size == 0:
                while line := self._line():  # trailers, then the blank line
                    name, _, value = line.decode("latin-1").partition(":")
                    name, value = name.lower(), value.strip()
                    seen = res.trailers.get(name)
                    res.trailers[name] = value if seen is None else f"{seen}, {value}"
                break
            data = self._exact(size + 2)
            if data is None:
                res.complete = False
                res.chunks.append(bytes(self.buf))
                break
            res.chunks.append(data[:-2])
        res.body = b"".join(res.chunks)

    def read_chunk(self) -> bytes:
        """Read the next chunk of a chunked body whose head was read with `read_head`."""
        size = int(self._line().split(b";")[0], 16)
        data = self._exact(size + 2)
        assert data is not None, "connection closed inside a chunk"
        return data[:-2]

    def at_eof(self, timeout: float = 3.0) -> bool:
        """True if the peer closed with nothing more to read (within `timeout`)."""
        if self.buf:
            return False
        self.sock.settimeout(timeout)
        try:
            return not self._fill()
        except ConnectionResetError:
            return True


def request_bytes(
    method: str = "GET",
    target: str = "/ping",
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    version: str = "HTTP/1.1",
    host: bool = True,
) -> bytes:
    """A raw request; Content-Length is added for a body unless `headers` frame it."""
    lines = [f"{method} {target} {version}"]
    if host:
        lines.append("Host: test")
    lines += [f"{name}: {value}" for name, value in headers]
    names = {name.lower() for name, _ in headers}
    if body and not names & {"content-length", "transfer-encoding"}:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def get(
    address: Address,
    target: str = "/ping",
    timeout: float = 5.0,
    *,
    headers: Sequence[tuple[str, str]] = (),
    tls: ssl.SSLContext | None = None,
) -> WireResponse:
    """One GET on a fresh connection with `Connection: close`."""
    with connect(address, timeout, tls=tls) as sock:
        sock.sendall(request_bytes("GET", target, [*headers, ("Connection", "close")]))
        return Reader(sock).read_response()
