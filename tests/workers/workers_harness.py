"""Helpers for the worker tests: launch a real master, talk HTTP to it, watch its processes."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "run_master.py"
BOOT_TIMEOUT = 15.0

T = TypeVar("T")
AddressLike = tuple[str, int] | list[Any] | str


def ipv6_available() -> bool:
    """Whether the IPv6 loopback can be bound here."""
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not ipv6_available(), reason="no IPv6 loopback")


@dataclass
class Response:
    """A parsed HTTP response."""

    status: int
    body: str


def http_get(address: AddressLike, path: str = "/", timeout: float = 5.0) -> Response:
    """One GET on a new connection (``Connection: close``); raises OSError on any failure."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: Any = address
    else:
        host, port = address[0], int(address[1])
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        target = (host, port)
    with sock:
        sock.settimeout(timeout)
        sock.connect(target)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise ConnectionError(f"incomplete response: {data!r}")
    status = int(head.split(b" ", 2)[1])
    return Response(status, body.decode())


def process_state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (None once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (zombies count as dead)."""
    return process_state(pid) not in (None, "Z", "X")


def children_of(parent: int) -> list[int]:
    """Live (non-zombie) child pids of ``parent``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return sorted(found)


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


@dataclass
class MasterProcess:
    """A running ``run_master.py`` subprocess."""

    proc: subprocess.Popen[str]
    stderr_path: Path
    version_file: Path
    report: dict[str, Any] = field(default_factory=dict)
    known_workers: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        """The master's pid."""
        return self.proc.pid

    @property
    def address(self) -> AddressLike:
        """The first bound address."""
        first: AddressLike = self.report["addresses"][0]
        return first

    def get(self, path: str = "/", timeout: float = 5.0) -> Response:
        """GET ``path`` on the first address."""
        return http_get(self.address, path, timeout)

    def signal(self, signum: int) -> None:
        """Send a signal to the master."""
        os.kill(self.pid, signum)

    def workers(self) -> list[int]:
        """Current live worker pids (remembered for cleanup)."""
        pids = children_of(self.pid)
        self.known_workers.update(pids)
        return pids

    def wait_workers(self, predicate: Callable[[list[int]], bool], timeout: float) -> list[int]:
        """Poll the worker pids until ``predicate(pids)`` holds; returns those pids."""
        found: list[int] = []

        def check() -> bool:
            nonlocal found
            found = self.workers()
            return predicate(found)

        wait_for(check, timeout)
        return found

    def stderr(self) -> str:
        """Everything the master and its workers wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def wait_exit(self, timeout: float) -> int:
        """Wait for the master to exit; returns its exit code."""
        return self.proc.wait(timeout)

    def destroy(self) -> None:
        """Kill whatever is left of this master and its workers."""
        self.workers()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        for pid in self.known_workers:
            if is_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


Launcher = Callable[..., MasterProcess]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launcher]:
    """Start ``run_master.py`` with the given options; by default wait until it is ready."""
    started: list[MasterProcess] = []

    def _launch(*args: str, version: str = "v1", wait_ready: bool = True) -> MasterProcess:
        index = len(started)
        version_file = tmp_path / f"version-{index}"
        version_file.write_text(version)
        stderr_path = tmp_path / f"stderr-{index}.txt"
        env = dict(os.environ, FAKE_APP_VERSION_FILE=str(version_file), PYTHONUNBUFFERED="1")
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(LAUNCHER), *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=tmp_path,
                text=True,
                start_new_session=True,  # keep test-runner Ctrl-C away from the master
            )
        master = MasterProcess(proc, stderr_path, version_file)
        started.append(master)
        if wait_ready:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], BOOT_TIMEOUT)
            line = proc.stdout.readline() if ready else ""
            if not line:
                pytest.fail(f"master did not become ready:\n{master.stderr()}")
            master.report = json.loads(line)
            master.known_workers.update(master.report["workers"])
        return master

    yield _launch
    for master in started:
        master.destroy()
