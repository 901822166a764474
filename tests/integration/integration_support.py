"""Helpers for the integration tests: run the real `socketify` command, talk raw HTTP to it.

`ServerProcess` starts `socketify run ...` (or any `socketify` command line) in its own
process group with stderr in a file, waits until the address answers HTTP, and stops it with
SIGTERM. The wire helpers read responses off a plain socket, so pipelining, interim 100s,
chunked framing and close-delimited bodies are all visible exactly as the server sent them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BOOT_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
# The installed console script, next to this interpreter: the command users run.
SOCKETIFY = str(Path(sys.executable).with_name("socketify"))
LISTENING = re.compile(r"listening on (\S+)")

Address = tuple[str, int] | str  # (host, port) or a Unix socket path
T = TypeVar("T")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ipv6_loopback() -> bool:
    """Whether `::1` can be bound on this machine."""
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def connect(address: Address, timeout: float = 5.0) -> socket.socket:
    """A blocking client socket connected to `address`."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _live_processes() -> Iterator[tuple[int, int, int]]:
    """(pid, ppid, process group) of every live, non-zombie process, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after the last ")".
        state, ppid, pgrp = stat.rpartition(")")[2].split()[:3]
        if state != "Z":
            yield int(entry), int(ppid), int(pgrp)


def child_pids(pid: int) -> list[int]:
    """Pids of the live direct children of `pid`."""
    return sorted(child for child, ppid, _ in _live_processes() if ppid == pid)


def wait_for(
    predicate: Callable[[], T], timeout: float, interval: float = 0.05, message: str = "condition"
) -> T:
    """Poll `predicate()` until it returns a truthy value; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


# -- responses off the wire -----------------------------------------------------------------


@dataclass
class WireResponse:
    """One response as read from the socket."""

    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; repeats joined with ", "
    body: bytes
    chunks: list[bytes] = field(default_factory=list)  # chunk payloads, if chunked
    complete: bool = True  # False: the body was cut short (EOF before its declared end)

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        return self.headers.get(name.lower())


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
                while self._line():  # trailers, then the blank line
                    pass
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


def get(address: Address, target: str = "/ping", timeout: float = 5.0) -> WireResponse:
    """One GET on a fresh connection with `Connection: close`."""
    with connect(address, timeout) as sock:
        sock.sendall(request_bytes("GET", target, [("Connection", "close")]))
        return Reader(sock).read_response()


# -- the server process ---------------------------------------------------------------------


class ServerProcess:
    """A `socketify` command running in its own process group, stderr captured in a file."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        log_path: Path,
        address: Address,
        env: dict[str, str] | None = None,
        cwd: Path = HERE,
    ) -> None:
        self.args = list(args)
        self.log_path = log_path
        self.address = address
        environment = dict(os.environ)
        pythonpath = [str(HERE), str(REPO)]
        if env and "PYTHONPATH" in env:
            pythonpath.insert(0, env["PYTHONPATH"])
        environment.update(env or {})
        environment["PYTHONPATH"] = os.pathsep.join(pythonpath)
        environment["PYTHONDONTWRITEBYTECODE"] = "1"  # a rewritten module is never read stale
        environment["PYTHONUNBUFFERED"] = "1"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [SOCKETIFY, *self.args],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=environment,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        """The master's pid."""
        return self.proc.pid

    def output(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def wait_listening(self, timeout: float = BOOT_TIMEOUT) -> str:
        """Wait for the `listening on ...` log line; return the address it names."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = LISTENING.search(self.output())
            if match:
                return match.group(1).rstrip(",")
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"no 'listening on' line after {timeout}s:\n{self.output()}")

    @property
    def tcp(self) -> tuple[str, int]:
        """The (host, port) of a TCP server."""
        assert not isinstance(self.address, str), "a Unix socket server"
        return self.address

    def wait_answering(self, timeout: float = BOOT_TIMEOUT) -> None:
        """Wait until the address answers an HTTP request."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                get(self.address, "/", timeout=2.0)
                return
            except (OSError, EOFError, AssertionError) as exc:
                last = exc
                time.sleep(0.05)
        raise AssertionError(f"server not answering after {timeout}s ({last!r}):\n{self.output()}")

    def workers(self) -> list[int]:
        """Pids of the master's live worker processes."""
        return child_pids(self.pid)

    def signal(self, signum: int) -> None:
        """Send `signum` to the master."""
        os.kill(self.pid, signum)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status, or None if the process is still running after `timeout`."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def group(self) -> list[int]:
        """Live processes of this server's process group (master and workers)."""
        return [pid for pid, _, pgrp in _live_processes() if pgrp == self.proc.pid]

    def stop(self, timeout: float = STOP_TIMEOUT) -> tuple[int | None, list[int]]:
        """SIGTERM the master and wait; returns (status or None if it hung, leftover pids).

        Anything of ours still running afterwards (a hung master, orphaned workers) is
        SIGKILLed by pid, so a failing test never leaves a server behind.
        """
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.signal(signal.SIGTERM)
        status = self.wait_exit(timeout)
        leftovers = []
        if status is None:
            leftovers.append(self.proc.pid)
            self.proc.kill()
            self.proc.wait(5)
        # Workers leave on their own once the master is gone (PDEATHSIG); give them a moment.
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not self.group(), 3.0, message="workers to exit")
        for pid in self.group():
            leftovers.append(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()
        return status, leftovers


# -- starting and stopping servers ----------------------------------------------------------

_counter = itertools.count()


class Launcher:
    """Starts servers and stops every one of them at teardown."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[ServerProcess] = []

    def __call__(
        self,
        app: str = "apps.basic:server",
        *,
        workers: int = 1,
        bind: str | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> ServerProcess:
        """Run `socketify run APP --bind BIND --workers N ARGS...`; wait until it answers."""
        address: Address
        if bind is None:
            address = ("127.0.0.1", free_port())
            bind = f"127.0.0.1:{address[1]}"
        elif bind.startswith("unix:"):
            address = bind[len("unix:") :]
        elif bind.startswith("["):
            host, _, port = bind[1:].partition("]:")
            address = (host, int(port))
        else:
            host, _, port = bind.rpartition(":")
            address = (host, int(port))
        command = ["run", app, "--bind", bind, "--workers", str(workers), *args]
        return self.start(command, address, env=env, wait=wait)

    def start(
        self,
        command: Sequence[str],
        address: Address,
        *,
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> ServerProcess:
        """Run any `socketify` command line; with `wait`, until `address` answers HTTP."""
        log_path = self.log_dir / f"server-{next(_counter)}.log"
        server = ServerProcess(command, log_path=log_path, address=address, env=env)
        self.started.append(server)
        if wait:
            if command[0] == "run" and "--error-log" not in command:
                # Printed once every worker is ready: an answer alone may come from the
                # first worker while the others are still importing the app.
                server.wait_listening()
            server.wait_answering()
        return server

    def stop_all(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """Stop every server; return the problems found (hung master, leftover workers)."""
        problems = []
        for server in self.started:
            running = server.proc.poll() is None
            status, leftovers = server.stop(timeout)
            command = f"`socketify {' '.join(server.args)}`"
            found = []
            if running and status is None:
                found.append(f"{command} did not exit within {timeout}s of SIGTERM")
            if leftovers:
                found.append(f"{command} left processes running: {leftovers}")
            if found:
                problems += [*found, server.output()[-4000:]]
        self.started.clear()
        return problems
