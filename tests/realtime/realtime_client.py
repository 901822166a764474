"""A minimal raw-socket SSE client for the realtime tests: events as they arrive, no buffering."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field


@dataclass
class Event:
    """One parsed event (comments are kept too, as `comments`)."""

    event: str = ""
    data: list[str] = field(default_factory=list)
    id: str | None = None
    retry: str | None = None
    comments: list[str] = field(default_factory=list)


class SseClient:
    """Opens `GET target` and reads the event stream one block (up to a blank line) at a time."""

    def __init__(
        self,
        port: int,
        target: str,
        headers: str = "",
        method: str = "GET",
        rcvbuf: int | None = None,
    ) -> None:
        """Send the request and read the head; `rcvbuf` shrinks SO_RCVBUF (a slow reader)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            # Before connect: the window the kernel advertises is fixed at the handshake.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(5)
        self.sock.connect(("127.0.0.1", port))
        request = f"{method} {target} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
        self.sock.sendall(f"{request}{headers}\r\n".encode())
        self.buf = b""
        self.head = self._until(b"\r\n\r\n").decode("latin-1")

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError(f"closed before {marker!r}; had {self.buf!r}")
            self.buf += data
        block, self.buf = self.buf.split(marker, 1)
        return block

    def next_event(self) -> Event:
        """The next block, parsed."""
        event = Event()
        for line in self._until(b"\n\n").decode("utf-8").split("\n"):
            name, _, value = line.partition(": ")
            if name == "":
                event.comments.append(value)
            elif name == "data":
                event.data.append(value)
            elif name in ("event", "id", "retry"):
                setattr(event, name, value)
        return event

    def next_data_event(self) -> Event:
        """The next block that is not a bare comment or retry."""
        while True:
            event = self.next_event()
            if event.data:
                return event

    def at_eof(self, timeout: float = 3.0) -> bool:
        """True if the server closes the connection (after any bytes still buffered)."""
        self.sock.settimeout(timeout)
        try:
            while data := self.sock.recv(65536):
                self.buf += data
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Close our end."""
        self.sock.close()
