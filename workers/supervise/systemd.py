"""systemd integration for the master: sd_notify, the watchdog, and socket activation.

Theory of operation
-------------------
Notifications (sd_notify(3)) are datagrams of ``KEY=VALUE`` lines sent to the Unix socket named
by ``$NOTIFY_SOCKET``; no library is needed. The master does not send them from its transition
code: ``Notifier.observe()`` runs at the end of every turn of the master's loop with the
master's state, compares it with what systemd was last told, and sends the difference:

- ``READY=1`` (with ``MAINPID`` and ``STATUS``) once every worker serves;
- ``RELOADING=1`` with ``MONOTONIC_USEC`` while a reload (HUP) starts a new generation, and
  ``READY=1`` when it completes or is abandoned (the old generation still serves);
- ``STOPPING=1`` when a stop begins;
- ``STATUS=`` how many workers serve and how many requests they served (from the heartbeat
  table), at most once per ``STATUS_INTERVAL`` when it changed;
- ``WATCHDOG=1`` every half of ``$WATCHDOG_USEC``.

The watchdog is driven by the loop itself, not by a thread: a master whose loop hangs stops
pinging and systemd restarts the service. A send that fails (queue full, systemd restarting)
is not recorded as told, so the next turn sends it again.

Socket activation (sd_listen_fds(3)): when ``$LISTEN_PID`` is this process, descriptors 3 to
``3 + $LISTEN_FDS - 1`` are listening sockets opened by systemd and named by
``$LISTEN_FDNAMES``. The master serves them instead of binding (see
``workers.supervise.listeners``).

Both read their variables once and remove them from the environment, so neither workers nor
the app's subprocesses mistake them for their own.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import time
from collections.abc import MutableMapping
from dataclasses import dataclass

from workers.supervise.heartbeat import HeartbeatTable
from workers.supervise.roster import Roster, WorkerProc
from workers.supervise.sockets import BindError

__all__ = ["Notifier", "listen_sockets"]

log = logging.getLogger("socketify.master")

LISTEN_FDS_START = 3  # SD_LISTEN_FDS_START: the first descriptor systemd passes
STATUS_INTERVAL = 1.0  # seconds between two STATUS= updates that only change counters


def listen_sockets(environ: MutableMapping[str, str] | None = None) -> list[socket.socket]:
    """The listening sockets systemd passed to this process (none without socket activation).

    Raises ``BindError`` for a descriptor that is not a listening stream socket: a datagram
    socket in the ``.socket`` unit is a configuration mistake better reported at start.
    """
    env = os.environ if environ is None else environ
    pid, count, names = (
        env.pop(key, None) for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")
    )
    if pid is None or count is None or not pid.isdigit() or int(pid) != os.getpid():
        return []  # not set, or meant for the process that started us
    if not count.isdigit():
        raise BindError(f"LISTEN_FDS={count!r} is not a number")
    if not int(count):
        return []
    labels = names.split(":") if names else []
    sockets: list[socket.socket] = []
    try:
        for index in range(int(count)):
            fd = LISTEN_FDS_START + index
            label = f"fd {fd} ({labels[index]})" if index < len(labels) else f"fd {fd}"
            sockets.append(_adopt(fd, label))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    described = ", ".join(labels[: len(sockets)]) or f"{len(sockets)} unnamed"
    log.info("using the sockets passed by systemd (%s); --bind is ignored", described)
    return sockets


def _adopt(fd: int, label: str) -> socket.socket:
    try:
        is_socket = stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError as exc:
        raise BindError(f"LISTEN_FDS: {label} is not open: {exc.strerror}") from None
    if not is_socket:
        raise BindError(f"LISTEN_FDS: {label} is not a socket")
    sock = socket.socket(fileno=fd)
    listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    if sock.type != socket.SOCK_STREAM or not listening:
        sock.detach()  # leave the descriptor as it was; it is not ours to close
        raise BindError(f"LISTEN_FDS: {label} is not a listening stream socket")
    # systemd passes them inheritable (they had to survive exec); forked workers keep them,
    # but programs the app executes must not hold our listening sockets.
    sock.set_inheritable(False)
    return sock


@dataclass(frozen=True)
class _Told:
    """What systemd was last told about the master's state."""

    state: str  # "starting", "ready", "reloading" or "stopping"
    status: str
    at: float


class Notifier:
    """Reports the master's state to systemd over ``$NOTIFY_SOCKET``; inert without one."""

    def __init__(self, address: str | None, watchdog_usec: int = 0) -> None:
        self._sock: socket.socket | None = None
        self._address = ""
        if address:
            if address.startswith("@"):
                self._address = "\0" + address[1:]  # an abstract socket
            elif address.startswith("/"):
                self._address = address
            else:
                log.warning("NOTIFY_SOCKET=%s is not supported; not notifying systemd", address)
        if self._address:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            # The loop must never wait on systemd: a full queue fails the send, retried later.
            self._sock.setblocking(False)
        self.watchdog_interval = watchdog_usec / 2e6 if self._sock is not None else 0.0
        self._next_ping = 0.0
        self._told = _Told("starting", "", 0.0)
        self._counts: dict[WorkerProc, int] = {}  # requests served, as last read per worker
        self._retired = 0  # requests served by workers that have exited
        self._warned = False

    @classmethod
    def from_env(cls, environ: MutableMapping[str, str] | None = None) -> Notifier:
        """A notifier for ``$NOTIFY_SOCKET`` and ``$WATCHDOG_USEC`` (both then unset)."""
        env = os.environ if environ is None else environ
        address, usec, pid = (
            env.pop(key, None) for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
        )
        watchdog = int(usec) if usec and usec.isdigit() else 0
        if pid and pid != str(os.getpid()):
            watchdog = 0  # the watchdog is another process's to feed
        return cls(address, watchdog)

    @property
    def enabled(self) -> bool:
        """Whether there is a systemd to notify."""
        return self._sock is not None

    def send(self, *lines: str) -> bool:
        """Send one notification of ``KEY=VALUE`` lines; False if it could not be delivered."""
        if self._sock is None:
            return False
        try:
            self._sock.sendto("\n".join(lines).encode(), self._address)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot notify systemd at %s: %s", self._address.lstrip("\0"), exc)
            return False
        return True

    def sleep_bound(self, tick: float) -> float:
        """``tick``, shortened so the loop wakes in time for the next watchdog ping."""
        if not self.watchdog_interval:
            return tick
        return max(0.0, min(tick, self._next_ping - time.monotonic()))

    def observe(
        self,
        phase: str,
        reloading: int | None,
        slots: int,
        roster: Roster,
        table: HeartbeatTable | None,
    ) -> None:
        """Tell systemd what changed since the last turn of the master's loop; feed the watchdog.

        ``phase`` is the master's phase name, ``reloading`` the generation a reload is starting.
        """
        if self._sock is None:
            return
        now = time.monotonic()
        if self.watchdog_interval and now >= self._next_ping and self.send("WATCHDOG=1"):
            self._next_ping = now + self.watchdog_interval
        state = _state_of(phase, reloading)
        status = self._status(state, reloading, slots, roster, table)
        told = self._told
        if state != told.state:
            lines = [*_transition(state), f"STATUS={status}"]
        elif status != told.status and now - told.at >= STATUS_INTERVAL:
            lines = [f"STATUS={status}"]
        else:
            return
        if self.send(*lines):
            self._told = _Told(state, status, now)

    def _status(
        self,
        state: str,
        reloading: int | None,
        slots: int,
        roster: Roster,
        table: HeartbeatTable | None,
    ) -> str:
        live = list(roster)
        alive = set(live)
        for proc in [proc for proc in self._counts if proc not in alive]:
            self._retired += self._counts.pop(proc)
        if table is not None:
            for proc in live:
                self._counts[proc] = table.read(proc.record).requests
        served = self._retired + sum(self._counts.values())
        ready = sum(1 for proc in live if proc.ready and proc.serving)
        if state == "starting":
            return f"Starting: {ready} of {slots} workers ready"
        if state == "stopping":
            return f"Stopping: {len(live)} workers left; {served} requests served"
        prefix = f"Reloading (generation {reloading}): " if state == "reloading" else ""
        return f"{prefix}{ready} workers serving, {served} requests served"

    def close(self) -> None:
        """Close the notification socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _state_of(phase: str, reloading: int | None) -> str:
    if phase in ("stopping", "stopped"):
        return "stopping"
    if phase == "running":
        return "reloading" if reloading is not None else "ready"
    return "starting"


def _transition(state: str) -> tuple[str, ...]:
    if state == "ready":
        return ("READY=1", f"MAINPID={os.getpid()}")
    if state == "reloading":
        # systemd matches a reload to its request by this clock (sd_notify(3), RELOADING=1).
        return (
            "RELOADING=1",
            f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}",
        )
    if state == "stopping":
        return ("STOPPING=1",)
    return ()
