"""The metrics listener in the master: `/metrics`, `/healthz` and `/readyz` on a private port.

Theory of operation. The master process (which never imports gevent) owns a `MetricsEndpoint`
as its `MasterObserver`. The listening socket is bound before any worker is forked, so a bad
`--metrics-bind` fails at start, and each worker closes its copy right after fork
(`in_child`): only the master answers there, which is why one scrape sees every worker.
Requests are served by a small threaded `http.server`: each connection gets a thread, at most
`MAX_CONNECTIONS` at once (more are closed at once), and a client idle for `IDLE_TIMEOUT` is
dropped, so a slow or hostile client cannot starve the probes.

The master's loop hands over a fresh `MasterStatus` after every turn and reports each worker
that ended; the endpoint then folds that worker's counters into the master's totals
(`TallyTable.retire`) and counts the restart by reason.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from socketify.metrics.builtin import BACKEND_UP
from socketify.metrics.exposition import CONTENT_TYPE, Exposition
from socketify.metrics.families import series_key
from socketify.metrics.health import Verdict, liveness, readiness
from workers.shared.tally import TallyTable
from workers.supervise.sockets import BindError, TcpAddress, open_tcp, parse_bind
from workers.supervise.status import ExitReason, MasterStatus, WorkerStatus

__all__ = ["MetricsEndpoint"]

MAX_CONNECTIONS = 32
IDLE_TIMEOUT = 10.0


class MetricsEndpoint:
    """Serves the master's metrics and health on `bind`; a `MasterObserver`."""

    def __init__(self, bind: str, table: TallyTable) -> None:
        address = parse_bind(bind)
        if not isinstance(address, TcpAddress):
            raise BindError(f"--metrics-bind {bind!r}: a TCP address is needed")
        self.table = table
        self._exposition = Exposition(table)
        self._status = MasterStatus(phase="new", reloading=False)
        self._restarts: dict[ExitReason, int] = {}
        self._lock = threading.Lock()  # the restart counts: the loop writes, scrapes read
        self._sock = open_tcp(address, backlog=64)
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        self._server = _Server(self, self._sock)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="socketify-metrics", daemon=True
        )
        self._thread.start()

    # -- MasterObserver ----------------------------------------------------------------------

    def on_status(self, status: MasterStatus) -> None:
        """Keep the master's latest status for the next probe."""
        self._status = status

    def on_worker_ended(self, worker: WorkerStatus, reason: ExitReason | None) -> None:
        """Keep what the worker counted; count the restart."""
        self.table.retire(worker.record)
        if reason is not None:
            with self._lock:
                self._restarts[reason] = self._restarts.get(reason, 0) + 1

    def in_child(self) -> None:
        """In a new worker: drop the master's listening socket."""
        self._sock.close()

    def close(self) -> None:
        """Stop answering and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    # -- answers -----------------------------------------------------------------------------

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """Status, content type and body for a GET of `path`."""
        status = self._status
        if path == "/metrics":
            with self._lock:
                restarts = dict(self._restarts)
            return 200, CONTENT_TYPE, self._exposition.render(status, restarts)
        if path == "/healthz":
            return _plain(liveness(status))
        if path == "/readyz":
            return _plain(readiness(status, self._backend_up()))
        return 404, "text/plain; charset=utf-8", b"Not Found: try /metrics, /healthz, /readyz\n"

    def _backend_up(self) -> bool | None:
        found = self.table.collect().entries.get(series_key(BACKEND_UP.name, ()))
        return None if found is None else bool(found[1][0])


def _plain(verdict: Verdict) -> tuple[int, str, bytes]:
    return verdict.status, "text/plain; charset=utf-8", f"{verdict.reason}\n".encode()


class _Server(ThreadingHTTPServer):
    """`http.server` on the endpoint's socket, with a cap on concurrent connections."""

    daemon_threads = True

    def __init__(self, endpoint: MetricsEndpoint, sock: socket.socket) -> None:
        super().__init__(endpoint.address, _Handler, bind_and_activate=False)
        self.socket.close()  # the one made by the constructor: `sock` is already listening
        self.socket = sock
        self.endpoint = endpoint
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the cap: closed, not queued
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Handler(BaseHTTPRequestHandler):
    """GET and HEAD of the three paths; nothing else."""

    server: _Server
    timeout = IDLE_TIMEOUT
    server_version = "socketify-metrics"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        path = self.path.partition("?")[0]
        try:
            status, content_type, body = self.server.endpoint.answer(path)
        except Exception:  # a scrape must never take the master down
            status, content_type, body = 500, "text/plain; charset=utf-8", b"error\n"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if send_body:
            with contextlib.suppress(OSError):
                self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Silent: a probe every few seconds would flood the log, and a thread that logs
        # could hold the logging lock while the master forks.
        pass
