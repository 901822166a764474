"""`CountingRelay`: a TCP relay between test clients and a server that counts what it carries.

    with CountingRelay(server.tcp) as relay:
        get(relay.address, "/ping")
        relay.wait_idle()
        relay.upstream, relay.downstream   # bytes client -> server, server -> client

Every connection to `relay.address` gets its own connection to the target; two threads copy
bytes each way and pass a half-close on (the peer's EOF becomes our shutdown of the other
side), so the server sees the client's FIN and the client the server's. The counts are the
TCP payload bytes that crossed the relay, measured apart from anything the server reports:
what a byte counter on the server's sockets must agree with.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from tests.support.wait import wait_for

__all__ = ["CountingRelay"]

_CHUNK = 65536


class CountingRelay:
    """Listens on a free port of 127.0.0.1 and relays each connection to `target`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.upstream = 0  # bytes from clients to the target
        self.downstream = 0  # bytes from the target to clients
        self.connections = 0  # connections relayed so far
        self._open = 0  # relayed connections with a direction still copying
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._listener.getsockname()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> CountingRelay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting (connections under way finish on their own)."""
        self._closed = True
        self._listener.close()

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until every relayed connection has ended in both directions."""
        wait_for(lambda: self._open == 0, timeout=timeout, message="relayed connections to end")

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open += 1
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        try:
            with client, socket.create_connection(self.target) as server:
                down = threading.Thread(target=self._copy, args=(server, client, False))
                down.start()
                self._copy(client, server, True)
                down.join()
        finally:
            with self._lock:
                self._open -= 1

    def _copy(self, source: socket.socket, sink: socket.socket, up: bool) -> None:
        try:
            while data := source.recv(_CHUNK):
                sink.sendall(data)
                with self._lock:
                    if up:
                        self.upstream += len(data)
                    else:
                        self.downstream += len(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:  # a reset: end the other direction too, nothing more will cross
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
