"""Test-side HTTP(S) servers for the http_client tests: stdlib http.server in a thread.

`LocalServer` answers a handful of routes that each pin one client behaviour (echo, repeated
headers, gzip, redirects, slow answers) and records every request it sees, with the client's
source port, so tests can tell reused connections from new ones.
"""

from __future__ import annotations

import gzip
import json
import ssl
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import AF_INET6
from typing import Any
from urllib.parse import parse_qs

GZIP_TEXT = b"hello gzip " * 200


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    client_port: int

    def headers_dict(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the client's pooling is observable
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._route()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def _route(self) -> None:
        path, _, query = self.path.partition("?")
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(
            self.command, self.path, list(self.headers.items()), body, self.client_address[1]
        )
        self.server.seen.append(seen)
        getattr(self, "route_" + path.strip("/").replace("-", "_"), self.route_missing)(
            params, seen
        )

    def _send(self, status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route_missing(self, params: dict[str, str], seen: Seen) -> None:
        self._send(404, b"not found\n", [("Content-Type", "text/plain")])

    def route_echo(self, params: dict[str, str], seen: Seen) -> None:
        doc = {
            "method": seen.method,
            "path": seen.path,
            "headers": seen.headers,
            "body": seen.body.decode("latin-1"),
            "client_port": seen.client_port,
        }
        self._send(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])

    def route_repeat(self, params: dict[str, str], seen: Seen) -> None:
        self._send(
            200,
            b"ok",
            [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Multi", "one"), ("X-Multi", "two")],
        )

    def route_gzip(self, params: dict[str, str], seen: Seen) -> None:
        if "gzip" in (self.headers.get("Accept-Encoding") or ""):
            self._send(200, gzip.compress(GZIP_TEXT), [("Content-Encoding", "gzip")])
        else:
            self._send(200, GZIP_TEXT)

    def route_deflate(self, params: dict[str, str], seen: Seen) -> None:
        self._send(200, zlib.compress(GZIP_TEXT), [("Content-Encoding", "deflate")])

    def route_bad_gzip(self, params: dict[str, str], seen: Seen) -> None:
        self._send(200, b"this is not gzip at all", [("Content-Encoding", "gzip")])

    def route_chunked(self, params: dict[str, str], seen: Seen) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in (b"hello ", b"chunked ", b"world"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def route_latin1(self, params: dict[str, str], seen: Seen) -> None:
        self._send(200, "café".encode("latin-1"), [("Content-Type", "text/plain; charset=latin-1")])

    def route_redirect(self, params: dict[str, str], seen: Seen) -> None:
        code = int(params.get("code", "302"))
        self._send(code, b"", [("Location", params.get("to", "/echo"))])

    def route_loop(self, params: dict[str, str], seen: Seen) -> None:
        self._send(302, b"", [("Location", "/loop")])

    def route_slow(self, params: dict[str, str], seen: Seen) -> None:
        time.sleep(float(params.get("delay", "1")))
        self._send(200, b"slow")

    def route_status(self, params: dict[str, str], seen: Seen) -> None:
        self._send(
            int(params["code"]),
            params.get("body", "").encode(),
            [("Content-Type", params.get("type", "text/plain"))],
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping must not hold up teardown
    seen: list[Seen]

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or refuse a certificate hang up on purpose


class _Server6(_Server):
    address_family = AF_INET6


class LocalServer:
    """A threaded HTTP/1.1 server on a free port; HTTPS when given a server TLS context."""

    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        cls = _Server6 if ":" in host else _Server
        self.httpd = cls((host, 0), _Handler)
        self.httpd.seen = []
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.host = host
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}"

    @property
    def seen(self) -> list[Seen]:
        return self.httpd.seen

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
