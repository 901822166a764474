"""A fake $NOTIFY_SOCKET: what systemd is to a master that reports its state.

`NotifyListener` is what systemd is to the master: a Unix datagram socket whose path goes into
$NOTIFY_SOCKET. It reads each notification with the sender's credentials (SO_PASSCRED), so a
test can also check that only the master - never a worker - talks to systemd.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Notification", "NotifyListener"]

_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


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
