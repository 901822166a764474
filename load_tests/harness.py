"""Start, probe and stop the servers under test.

Theory of operation: every server runs in its own session, hence its own process group, with
its output in a temporary file. `serve()` polls GET /ping until it answers 200 (20 s limit),
hands the running server to the caller, and on exit sends SIGTERM to the whole group, then
SIGKILL to whatever is left after 3 s, so pre-fork workers never outlive a run. The /proc
helpers find a master's workers and their resident memory.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[1]
LOAD_TESTS = REPO_ROOT / "load_tests"
HOST = "127.0.0.1"
PING_PATH = "/ping"
READY_TIMEOUT = 20.0
READY_POLL = 0.05
STOP_GRACE = 3.0
# 1-worker runs: the server (master and worker) on CPU 1, wrk on CPU 0.
SERVER_CPU = 1
WRK_CPU = 0


class ServerFailedToStart(RuntimeError):
    """The server exited, or did not answer GET /ping with 200, within the start-up limit."""


@dataclass
class RunningServer:
    """A server that answered GET /ping with 200, in its own process group."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    ready_path: str = PING_PATH  # what `serve()` polls until it answers 200

    @property
    def pid(self) -> int:
        """The pid of the process we started (the master, for pre-fork servers)."""
        return self.process.pid

    @property
    def url(self) -> str:
        """The URL `serve()` polls (/ping unless the server has none)."""
        return f"http://{HOST}:{self.port}{self.ready_path}"

    def log_tail(self, lines: int = 15) -> str:
        """The last lines the server wrote to stdout/stderr."""
        self.log.seek(0)
        return "\n".join(self.log.read().decode(errors="replace").splitlines()[-lines:])


@dataclass(frozen=True)
class RawResponse:
    """The exact bytes of one /ping response, to check that servers send equivalent headers."""

    raw: bytes

    @property
    def size(self) -> int:
        """Bytes on the wire: status line, headers and body."""
        return len(self.raw)

    @property
    def status_line(self) -> str:
        """E.g. 'HTTP/1.1 200 OK'."""
        return self.raw.split(b"\r\n", 1)[0].decode("latin-1")

    @property
    def header_names(self) -> list[str]:
        """Header names in the order sent."""
        head = self.raw.partition(b"\r\n\r\n")[0].decode("latin-1")
        return [line.partition(":")[0] for line in head.split("\r\n")[1:]]


def free_port() -> int:
    """A TCP port on HOST that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def pinned(argv: Sequence[str], cpu: int | None) -> list[str]:
    """argv run under `taskset -c CPU` (taskset execs, so the pid stays the server's)."""
    return list(argv) if cpu is None else ["taskset", "-c", str(cpu), *argv]


@contextlib.contextmanager
def serve(
    name: str,
    argv: Sequence[str],
    port: int,
    *,
    nofile: int | None = None,
    cwd: Path = REPO_ROOT,
    ready_path: str = PING_PATH,
) -> Iterator[RunningServer]:
    """Run argv (from the repository root by default) until the block exits.

    nofile raises RLIMIT_NOFILE. `python -m` puts its working directory first on sys.path, so a
    caller that wants PYTHONPATH's order to decide which socketify runs passes another cwd.
    ready_path replaces /ping as the path that must answer 200 before the server counts as up.
    """
    env = {**server_env(), "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_nofile_setter(nofile),
        )
        server = RunningServer(name, port, process, log, ready_path)
        try:
            _wait_ready(server)
            yield server
        finally:
            stop(process)


def server_env() -> dict[str, str]:
    """The environment servers run with: this one, with this tree on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": _prepend_path(os.environ.get("PYTHONPATH"))}


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so `serve()` still stops the servers it started."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL whatever is still alive after STOP_GRACE."""
    group = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        process.poll()  # reap the leader, or the group never looks empty
        if not _group_alive(group):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    process.wait()


def read_response(sock: socket.socket) -> bytes:
    """Read one Content-Length-framed response from sock (not pipelined: extra bytes are lost)."""
    data = b""
    while b"\r\n\r\n" not in data:
        if not (chunk := sock.recv(4096)):
            raise ConnectionError(f"closed after {len(data)} bytes, before the end of the head")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = _content_length(head)
    while len(body) < length:
        if not (chunk := sock.recv(4096)):
            raise ConnectionError("closed in the middle of the body")
        body += chunk
    return head + b"\r\n\r\n" + body[:length]


def ping_request(port: int) -> bytes:
    """One keep-alive GET /ping, as a browser-less client would send it."""
    return f"GET {PING_PATH} HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode()


def probe_response(port: int) -> RawResponse:
    """Send one GET /ping over a raw socket and return the response bytes."""
    with socket.create_connection((HOST, port), timeout=5) as sock:
        sock.sendall(ping_request(port))
        return RawResponse(read_response(sock))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of pid so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """Pids whose parent is pid (a pre-fork master's workers), from /proc."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # Fields after the parenthesised command name: state, ppid, ...
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                children.append(int(stat.parent.name))
    return sorted(children)


def rss_kib(pid: int) -> int:
    """Resident set size of pid in KiB (VmRSS in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ProcessLookupError(f"no VmRSS for pid {pid} (a zombie?)")


def raise_nofile(wanted: int) -> int:
    """Raise this process's RLIMIT_NOFILE to at least wanted; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        # Raising the hard limit needs CAP_SYS_RESOURCE; without it this raises ValueError.
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(wanted, hard)))
    return max(soft, wanted)


def _wait_ready(server: RunningServer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    last_error = "no answer"
    while time.monotonic() < deadline:
        if (code := server.process.poll()) is not None:
            raise ServerFailedToStart(
                f"{server.name} exited with status {code}:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(server.url, timeout=1) as response:
                if response.status == 200:
                    return
                last_error = f"status {response.status}"
        except urllib.error.HTTPError as error:
            last_error = f"status {error.code}"
        except (OSError, http.client.HTTPException) as error:
            last_error = str(error)
        time.sleep(READY_POLL)
    raise ServerFailedToStart(
        f"{server.name}: GET {server.url} not 200 after {READY_TIMEOUT:.0f} s ({last_error}):\n"
        f"{server.log_tail()}"
    )


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise ValueError(f"response without Content-Length: {head[:200]!r}")


def _prepend_path(existing: str | None) -> str:
    # A PYTHONPATH that already names this tree keeps its order: another tree listed before it
    # (a colleague's socketify, say) is the one the server imports.
    entries = existing.split(os.pathsep) if existing else []
    if str(REPO_ROOT) in entries:
        return existing or ""
    return os.pathsep.join([str(REPO_ROOT), *entries])


def _nofile_setter(nofile: int | None) -> Callable[[], None] | None:
    if nofile is None:
        return None

    def set_limit() -> None:  # runs in the child between fork and exec
        raise_nofile(nofile)

    return set_limit
