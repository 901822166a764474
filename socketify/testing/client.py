"""Testing helpers: an in-process `TestClient` and a `LiveServer` running the real CLI.

`TestClient(server)` sends each request through the same path a socket would — the request
is written as bytes, parsed by the real parser with the server's limits, dispatched by
`Server.handle`, serialized, and the bytes parsed back — with no sockets and no gevent, so
parser refusals, HEAD, 204/304 and chunked streams behave exactly as on the wire.
`client.websocket(path)` and `client.sse(path)` keep the connection open after the upgrade;
they run the real connection code in a greenlet (see `socketify.testing.realtime`).

`LiveServer("module:server")` starts `socketify run` in a subprocess on a free port, for tests
that need real processes and sockets; it is also the `live_server` pytest fixture.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import orjson

from socketify.core.response import Response
from socketify.protocol.http11 import NEED_DATA, ParseError, RequestHead, ServerConnection
from socketify.server.exchange import FileRange, request_for, response_parts
from socketify.server.request_body import RequestBody, Unread
from socketify.testing.response import TestResponse

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.testing.realtime import EventStreamSession, WebSocketSession

__all__ = ["LiveServer", "TestClient", "TestResponse", "logs_startup"]

_STARTED = re.compile(r"Socketify \S+ listening on ")  # logged once every worker is ready


class TestClient:
    """Runs requests through `server` in-process; keeps cookies like a browser session."""

    __test__ = False

    def __init__(self, server: Application, *, remote_addr: str = "127.0.0.1") -> None:
        from socketify.server import green_asyncio

        green_asyncio.install()  # `async def` handlers run on this process's asyncio loop
        self.server = server
        self.remote_addr = remote_addr
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        data: bytes | str | Mapping[str, Any] | None = None,
        json: Any = None,
        version: str = "HTTP/1.1",
        trailers: Mapping[str, str] | None = None,
    ) -> TestResponse:
        """Send one request and return the response the client would receive.

        With `trailers` the body is sent chunked and the fields follow it (`req.trailers`).
        """
        body, content_type = _encode_body(data, json)
        fields: dict[str, str] = {}
        if content_type:
            fields["Content-Type"] = content_type
        if trailers is not None:
            fields["Transfer-Encoding"] = "chunked"
            body = _chunked(body, trailers)
        elif body or method in ("POST", "PUT", "PATCH"):
            fields["Content-Length"] = str(len(body))
        fields.update(headers or {})
        raw = self._request_bytes(method, path, query, fields, version) + body
        response = TestResponse(self.exchange(raw))
        self._store_cookies(response)
        return response

    def websocket(
        self,
        path: str,
        *,
        subprotocols: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        timeout: float = 5.0,
    ) -> WebSocketSession:
        """Open a WebSocket to `path`, served in-process by the real connection code.

        Needs gevent (the server side runs in a greenlet); raises `UpgradeRefused` with the
        response when the server does not switch protocols.
        """
        from socketify.server.in_process import open_connection
        from socketify.testing.realtime import open_websocket

        fields = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
            "Sec-WebSocket-Version": "13",
        }
        if subprotocols:
            fields["Sec-WebSocket-Protocol"] = ", ".join(subprotocols)
        fields.update(headers or {})
        raw = self._request_bytes("GET", path, query, fields, "HTTP/1.1")
        return open_websocket(open_connection(self.server, self.remote_addr), raw, timeout)

    def sse(
        self,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        last_event_id: str | None = None,
        timeout: float = 5.0,
    ) -> EventStreamSession:
        """Subscribe to the event stream at `path`, served in-process (needs gevent)."""
        from socketify.server.in_process import open_connection
        from socketify.testing.realtime import open_event_stream

        fields = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            fields["Last-Event-ID"] = last_event_id
        fields.update(headers or {})
        raw = self._request_bytes("GET", path, query, fields, "HTTP/1.1")
        return open_event_stream(open_connection(self.server, self.remote_addr), raw, timeout)

    def _request_bytes(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        version: str,
    ) -> bytes:
        target = path + ("?" + urlencode(query, doseq=True) if query else "")
        fields: dict[str, str] = {"Host": "testserver"}
        if self.cookies:
            fields["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        fields.update(headers)
        head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
        return f"{method} {target} {version}\r\n{head}\r\n".encode("latin-1")

    def exchange(self, raw: bytes) -> bytes:
        """Feed raw request bytes (one request) and return the raw response bytes.

        The request goes through the connection machine and the answering steps a socket's
        connection uses (`socketify.server.exchange`): the body is read only when the app asks
        for it, a limit refuses it from Content-Length, a framing error in it is answered
        instead of the app's answer, and the response says `Connection: close` where the
        server would close.
        """
        opts = self.server.settings
        conn = ServerConnection(
            opts.max_header_size,
            opts.max_target_size,
            opts.max_body_size,
            allow_bare_lf=opts.allow_bare_lf,
        )
        conn.receive_data(raw)
        try:
            head = conn.next_event()
            if head is NEED_DATA:
                conn.receive_data(b"")  # nothing more is coming: an unfinished head is refused
                head = conn.next_event()
            if not isinstance(head, RequestHead):
                raise ValueError("no complete request in the given bytes")
            req, body = request_for(
                conn,
                head,
                lambda body: _no_more_bytes(conn, body),
                self.remote_addr,
                opts.trust_proxy,
            )
            res = Response(req)
            self.server.handle(req, res)
            keep_alive = body is None or body.settle(res.status_code) is not Unread.CLOSE
        except ParseError as exc:
            return conn.refuse(exc.status, exc.detail)
        try:
            if res.upgrade is not None and not res.head_only:
                raise TypeError("an upgrade answer: use TestClient.websocket() or TestClient.sse()")
            return b"".join(map(_read_part, response_parts(conn, head, res, keep_alive)))
        finally:
            res.close()

    def get(self, path: str, **kwargs: Any) -> TestResponse:
        """GET `path`."""
        return self.request("GET", path, **kwargs)

    def head(self, path: str, **kwargs: Any) -> TestResponse:
        """HEAD `path`."""
        return self.request("HEAD", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> TestResponse:
        """POST to `path`."""
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> TestResponse:
        """PUT to `path`."""
        return self.request("PUT", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> TestResponse:
        """PATCH `path`."""
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> TestResponse:
        """DELETE `path`."""
        return self.request("DELETE", path, **kwargs)

    def options(self, path: str, **kwargs: Any) -> TestResponse:
        """OPTIONS `path`."""
        return self.request("OPTIONS", path, **kwargs)

    def _store_cookies(self, response: TestResponse) -> None:
        for line in response.headers.getall("Set-Cookie"):
            pair, _, attributes = line.partition(";")
            name, _, value = pair.partition("=")
            expired = re.search(r"(?i)max-age=0\b|expires=thu, 01 jan 1970", attributes)
            if expired:
                self.cookies.pop(name.strip(), None)
            else:
                self.cookies[name.strip()] = value.strip()


def _encode_body(data: Any, json: Any) -> tuple[bytes, str | None]:
    if json is not None:
        return orjson.dumps(json), "application/json"
    if data is None:
        return b"", None
    if isinstance(data, Mapping):
        return urlencode(data, doseq=True).encode(), "application/x-www-form-urlencoded"
    return (data.encode() if isinstance(data, str) else bytes(data)), None


def _chunked(body: bytes, trailers: Mapping[str, str]) -> bytes:
    """`body` in the chunked coding (one chunk), ended by the trailer section `trailers`."""
    chunk = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
    section = "".join(f"{name}: {value}\r\n" for name, value in trailers.items())
    return chunk + b"0\r\n" + section.encode("latin-1") + b"\r\n"


def _no_more_bytes(conn: ServerConnection, body: RequestBody) -> None:
    """The client sent all it had: a body that needs more than the request held is cut short."""
    conn.continue_response(body.head)  # as a socket's connection does on the first wait
    conn.receive_data(b"")


def _read_part(part: bytes | FileRange) -> bytes:
    """A part of the answer as the client receives it (a file range read from disk)."""
    if isinstance(part, bytes):
        return part
    with open(part.path, "rb") as file:
        file.seek(part.offset)
        return part.head + file.read(part.length)


# -- a real server in a subprocess -----------------------------------------------------------------


class LiveServer:
    """`socketify run APP` on a free loopback port; a context manager."""

    def __init__(
        self,
        app: str,
        *,
        workers: int = 1,
        args: tuple[str, ...] = (),
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.app = app
        self.workers = workers
        self.args = args
        self.cwd = cwd
        self.env = {**os.environ, **(env or {})}
        self.startup_timeout = startup_timeout
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: a pipe nobody drains would block a chatty server.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LiveServer:
        """Start the server and wait until every worker serves.

        The master binds the port before its workers have imported the app, so an accepted
        connection proves little; the startup line it logs once all workers are ready does
        (with `--log-level warning` or quieter there is none, and a connection has to do).
        """
        command = [
            sys.executable,
            "-m",
            "socketify.cli",
            "run",
            self.app,
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(self.workers),
            *self.args,
        ]
        self.process = subprocess.Popen(command, cwd=self.cwd, env=self.env, stderr=self._stderr)
        quiet = not logs_startup(self.args)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"socketify run exited with {self.process.returncode}:\n{self.log()}"
                )
            if quiet:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return self
                except OSError:
                    pass
            elif _STARTED.search(self.log()):
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"{self.app} did not start within {self.startup_timeout} s")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (graceful), then SIGKILL after `timeout`; returns the exit status."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log(self) -> str:
        """Everything the server wrote to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def logs_startup(args: Sequence[str]) -> bool:
    """Whether `socketify run` with the options `args` writes its startup line to stderr.

    It does unless the error log goes to a file or the log level is above info.
    """
    level = "info"
    for arg, following in zip(args, [*args[1:], ""], strict=False):
        if arg == "--error-log" or arg.startswith("--error-log="):
            return False
        if arg == "--log-level":
            level = following
        elif arg.startswith("--log-level="):
            level = arg.partition("=")[2]
    return level.lower() in ("debug", "info")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def live_server_fixture() -> Iterator[type[LiveServer]]:
    """Pytest fixture body: yields `LiveServer`; servers started through it stop at teardown."""
    started: list[LiveServer] = []

    class _Tracked(LiveServer):
        def start(self) -> LiveServer:
            started.append(self)
            return super().start()

    yield _Tracked
    for server in started:
        server.stop()
