"""Helpers for the systemd tests: a fake $NOTIFY_SOCKET, the real systemd tools, /proc lookups.

`NotifyListener` is what systemd is to the master: a Unix datagram socket whose path goes into
$NOTIFY_SOCKET. It reads each notification with the sender's credentials (SO_PASSCRED), so a
test can also check that only the master - never a worker - talks to systemd.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


def require_program(name: str, package: str) -> str:
    """The path of `name`; skip without it, or fail under SOCKETIFY_REQUIRE_SERVICES=1."""
    from services import REQUIRE_ENV, services_required

    path = shutil.which(name)
    if path is None:
        reason = f"{name} is not installed (Debian package {package!r})"
        if services_required():
            pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes this a failure", pytrace=False)
        pytest.skip(reason)
    return path


@dataclass(frozen=True)
class Notification:
    """One datagram: its KEY=VALUE fields, the sender's pid and when it arrived."""

    fields: dict[str, str]
    pid: int
    at: float

    def __getitem__(self, key: str) -> str:
        return self.fields[key]

    def __contains__(self, key: object) -> bool:
        return key in self.fields


class NotifyListener:
    """A Unix datagram socket standing in for systemd's notification socket."""

    def __init__(self) -> None:
        # sun_path holds 108 bytes; pytest's tmp_path can be longer than that.
        self._dir = tempfile.mkdtemp(prefix="sd-", dir="/tmp")
        self.path = os.path.join(self._dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)
        self.seen: list[Notification] = []

    def receive(self, timeout: float) -> Notification | None:
        """The next notification, or None after `timeout` seconds."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(_UCRED.size))
        except TimeoutError:
            return None
        pid = -1
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = _UCRED.unpack(payload[: _UCRED.size])[0]
        fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
        note = Notification(fields, pid, time.monotonic())
        self.seen.append(note)
        return note

    def wait_for(
        self,
        key: str,
        value: str | Callable[[str], bool] = "1",
        timeout: float = 15.0,
    ) -> Notification:
        """Read until a notification sets `key` to `value` (or to a value `value` accepts)."""
        accepts = value if callable(value) else value.__eq__
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            note = self.receive(left)
            if note is not None and key in note and accepts(note[key]):
                return note
        got = "\n".join(repr(n.fields) for n in self.seen[-20:])
        raise AssertionError(f"no matching {key}= within {timeout}s; last notifications:\n{got}")

    def collect(self, seconds: float) -> list[Notification]:
        """Everything that arrives within `seconds`."""
        deadline = time.monotonic() + seconds
        found = []
        while (left := deadline - time.monotonic()) > 0:
            note = self.receive(left)
            if note is not None:
                found.append(note)
        return found

    def close(self) -> None:
        """Close the socket and remove its directory."""
        self.sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def socket_inodes(pid: int) -> set[str]:
    """`socket:[inode]` targets of the open descriptors of `pid`."""
    found = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for entry in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(entry)
            if target.startswith("socket:"):
                found.add(target)
    return found


def listening_tcp_sockets(port: int) -> int:
    """How many TCP sockets listen on `port` (IPv4 and IPv6), from /proc/net."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


def process_gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


class Activated:
    """`systemd-socket-activate -l 127.0.0.1:PORT ... COMMAND` in its own process group.

    The activator binds, waits for the first connection, then execs COMMAND (same pid) with
    the socket as fd 3 and LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES set. Output goes to `log_path`.
    """

    def __init__(
        self, activator: str, port: int, options: list[str], command: list[str], log_path: Path
    ) -> None:
        self.port = port
        self.log_path = log_path
        env = dict(os.environ)
        pythonpath = [str(HERE), str(HERE.parent / "integration"), str(HERE.parent.parent)]
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        env["PYTHONUNBUFFERED"] = "1"
        # The activator passes its children only the variables named with -E.
        passed = ["-E", "PYTHONPATH", "-E", "PYTHONUNBUFFERED", "-E", "PYTHONDONTWRITEBYTECODE"]
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [activator, "-l", f"127.0.0.1:{port}", *passed, *options, *command],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while "Listening on" not in self.output():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the activator did not listen:\n{self.output()}")
            time.sleep(0.02)

    @property
    def pid(self) -> int:
        """The activator's pid, which becomes COMMAND's once it has exec'd."""
        return self.proc.pid

    def output(self) -> str:
        """What the activator and COMMAND wrote so far."""
        return self.log_path.read_text(errors="replace")

    def group(self) -> list[int]:
        """Live processes of the activator's process group."""
        found = []
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError, IndexError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if entry.isdigit() and fields[0] != "Z" and int(fields[2]) == self.proc.pid:
                    found.append(int(entry))
        return found

    def stop(self, timeout: float = 10.0) -> list[str]:
        """SIGTERM the process and wait; returns the problems (hung, leftover processes)."""
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                problems.append(f"pid {self.proc.pid} did not exit within {timeout}s of SIGTERM")
                self.proc.kill()
                self.proc.wait(5)
        deadline = time.monotonic() + 3
        while self.group() and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in self.group():
            problems.append(f"process {pid} left running")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()
        if problems:
            problems.append(self.output()[-4000:])
        return problems
