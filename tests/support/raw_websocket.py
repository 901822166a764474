"""A raw-socket WebSocket client for tests that must put exact (and wrong) bytes on the wire.

It writes masked frames byte for byte as told (any opcode, RSV bits, FIN, mask or no mask, a
declared length that differs from the payload) and reads the server's frames as they are,
so the tests check the server against RFC 6455 itself rather than through a client library
that would refuse to send bad frames or would hide the server's exact answer.
"""

from __future__ import annotations

import base64
import os
import socket
import zlib
from dataclasses import dataclass

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0


@dataclass(frozen=True)
class Frame:
    """A server frame as it arrived."""

    opcode: int
    payload: bytes
    fin: bool = True
    rsv: int = 0  # the three RSV bits, RSV1 = 0b100

    @property
    def close_code(self) -> int | None:
        """The code of a close frame, None when it carried none."""
        return int.from_bytes(self.payload[:2], "big") if len(self.payload) >= 2 else None


def client_frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    masked: bool = True,
    declared: int | None = None,
) -> bytes:
    """One client frame; `declared` overrides the length field (the payload is sent as is)."""
    n = len(payload) if declared is None else declared
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    mask_bit = 0x80 if masked else 0
    if n < 126:
        head = bytes((b0, mask_bit | n))
    elif n < 0x10000:
        head = bytes((b0, mask_bit | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((b0, mask_bit | 127)) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i & 3] for i, b in enumerate(payload))


def close_frame(code: int | None = None, reason: bytes = b"") -> bytes:
    """A client close frame; no code means an empty payload."""
    payload = b"" if code is None else code.to_bytes(2, "big") + reason
    return client_frame(CLOSE, payload)


class RawWebSocket:
    """An upgraded connection: `send(bytes)` raw, `recv_frame()` one server frame."""

    def __init__(
        self,
        port: int,
        target: str = "/",
        *,
        extensions: str = "",
        timeout: float = 5.0,
        rcvbuf: int | None = None,
    ) -> None:
        """Connect and upgrade; `rcvbuf` shrinks SO_RCVBUF first (a slow reader's window)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            # Before connect: the window the kernel advertises is fixed at the handshake.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {target} HTTP/1.1",
            "Host: 127.0.0.1",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if extensions:
            lines.append(f"Sec-WebSocket-Extensions: {extensions}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        head = self._until(b"\r\n\r\n").decode("latin-1")
        status, *fields = head.split("\r\n")
        if not status.startswith("HTTP/1.1 101 "):
            raise ConnectionError(f"upgrade refused: {head!r}")
        self.headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (field.partition(":") for field in fields)
        }
        self._inflater: zlib._Decompress | None = None

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            self._fill()
        block, self.buf = self.buf.split(marker, 1)
        return block

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise EOFError(f"closed by the server; {len(self.buf)} bytes unread")
        self.buf += data

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def send(self, data: bytes) -> None:
        """Write raw bytes."""
        self.sock.sendall(data)

    def recv_frame(self, timeout: float | None = None) -> Frame:
        """The next server frame (EOFError if TCP ends first); checks it is unmasked."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        b0, b1 = self._take(2)
        if b1 & 0x80:
            raise AssertionError("the server masked a frame (RFC 6455 §5.1 forbids it)")
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(self._take(2), "big")
        elif n == 127:
            n = int.from_bytes(self._take(8), "big")
        return Frame(b0 & 0x0F, self._take(n), bool(b0 & 0x80), (b0 >> 4) & 0x7)

    def recv_message(self, timeout: float | None = None) -> tuple[int, bytes]:
        """The next data message, reassembled and inflated; answers pings on the way."""
        opcode, parts, compressed = 0, [], False
        while True:
            frame = self.recv_frame(timeout)
            if frame.opcode == PING:
                self.send(client_frame(PONG, frame.payload))
                continue
            if frame.opcode in (TEXT, BINARY):
                opcode, compressed = frame.opcode, bool(frame.rsv & 0b100)
            elif frame.opcode != CONTINUATION:
                raise AssertionError(f"expected a data frame, got {frame}")
            parts.append(frame.payload)
            if frame.fin:
                data = b"".join(parts)
                return opcode, self.inflate(data) if compressed else data

    def inflate(self, data: bytes, *, window_bits: int = 15, takeover: bool = True) -> bytes:
        """Inflate one permessage-deflate message (RFC 7692 §7.2.2)."""
        if self._inflater is None or not takeover:
            self._inflater = zlib.decompressobj(-window_bits)
        return self._inflater.decompress(data + b"\x00\x00\xff\xff")

    def expect_close(self, timeout: float = 5.0) -> Frame:
        """Skip data frames up to the server's close frame and return it."""
        while True:
            frame = self.recv_frame(timeout)
            if frame.opcode == CLOSE:
                return frame

    def at_eof(self, timeout: float = 5.0) -> bool:
        """True if the server ends TCP (after any bytes still unread) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            while data := self.sock.recv(65536):
                self.buf += data
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True

    def close(self) -> None:
        """Drop our end."""
        self.sock.close()

    def __enter__(self) -> RawWebSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
