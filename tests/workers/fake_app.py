"""A tiny HTTP/1.1 keep-alive app served by the worker tests' target.

Imported only inside workers (after monkey-patching), freshly by each one, so a reload is
visible: ``VERSION`` is read from the file named by ``FAKE_APP_VERSION_FILE`` at import time,
and a file starting with ``boom`` makes the import fail (a boot failure).

Paths: ``/pid`` (this worker's pid), ``/version``, ``/slow?secs=S`` (cooperative sleep),
``/block?secs=S`` (the real, unpatched ``time.sleep``: the hub freezes), ``/log?msg=M`` (logs M
to the ``fake_app`` logger), anything else → ``ok``.
"""

from __future__ import annotations

import logging
import os
import socket
from urllib.parse import parse_qs, urlsplit

import gevent
from gevent.monkey import get_original
from gevent.pool import Pool
from gevent.server import StreamServer

from workers.supervise.context import WorkerContext

VERSION_FILE = os.environ.get("FAKE_APP_VERSION_FILE", "")
VERSION = open(VERSION_FILE).read().strip() if VERSION_FILE else "v0"  # noqa: SIM115
if VERSION.startswith("boom"):
    raise ImportError(f"fake_app refuses to import: {VERSION!r}")

log = logging.getLogger("fake_app")
real_sleep = get_original("time", "sleep")


def serve(ctx: WorkerContext) -> None:
    """Serve ctx.sockets until asked to stop, then drain (or not, for an immediate stop)."""
    group = Pool()  # unbounded; StreamServer needs a Pool to track handlers
    idle: set[socket.socket] = set()

    def handle(sock: socket.socket, _addr: object) -> None:
        buffer = b""
        served = 0
        try:
            while True:
                # Only a keep-alive connection between requests is idle. A fresh one has a
                # request on its way (the client connected to send it): serve it even while
                # stopping, or a connection accepted just before the stop would be dropped.
                if served:
                    idle.add(sock)
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffer += data
                idle.discard(sock)
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                target = lines[0].split(" ")[1]
                close = any(line.lower() == "connection: close" for line in lines[1:])
                body = route(target).encode()
                keep = not close and not ctx.stopping
                sock.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    + f"Content-Length: {len(body)}\r\n".encode()
                    + (b"" if keep else b"Connection: close\r\n")
                    + b"\r\n"
                    + body
                )
                ctx.request_done()
                served += 1
                if not keep:
                    return
        except OSError:
            return
        finally:
            idle.discard(sock)
            sock.close()

    servers = [StreamServer(sock, handle, spawn=group) for sock in ctx.sockets]
    for server in servers:
        server.start()

    def stop_accepting() -> None:
        for server in servers:
            server.close()
        for sock in list(idle):  # idle keep-alive connections: end them now
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    ctx.on_stop(stop_accepting)
    ctx.ready()
    ctx.wait_stop()
    if ctx.graceful:
        group.join(timeout=ctx.graceful_timeout)
    group.kill(block=False)


def route(target: str) -> str:
    """Answer one request target."""
    parts = urlsplit(target)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    if parts.path == "/pid":
        return str(os.getpid())
    if parts.path == "/version":
        return VERSION
    if parts.path == "/slow":
        gevent.sleep(float(query.get("secs", "1")))
        return "slow done"
    if parts.path == "/block":
        real_sleep(float(query.get("secs", "30")))
        return "unblocked"
    if parts.path == "/log":
        log.warning("fake_app says %s", query.get("msg", ""))
        return "logged"
    return "ok"
