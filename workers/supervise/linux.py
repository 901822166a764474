"""Linux process knobs the stdlib does not expose: prctl() and one TCP sysctl.

Everything here is best effort: on another OS, or without permission, the call does nothing and
reports False, and the caller keeps a fallback (workers also poll ``getppid()``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["enable_tcp_migrate_req", "set_parent_death_signal", "set_process_name"]

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
TASK_COMM_LEN = 16  # the kernel keeps 15 bytes of a process name plus NUL
MIGRATE_REQ = "/proc/sys/net/ipv4/tcp_migrate_req"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def _prctl(option: int, arg: int | bytes) -> bool:
    libc = _libc()
    prctl = getattr(libc, "prctl", None)
    if prctl is None:
        return False
    return bool(prctl(option, arg, 0, 0, 0) == 0)


def set_parent_death_signal(signum: int) -> bool:
    """Have the kernel send ``signum`` to this process when its parent thread dies."""
    return _prctl(PR_SET_PDEATHSIG, signum)


def set_process_name(name: str) -> bool:
    """Set the name ``ps``, ``top`` and ``pkill`` show (truncated to 15 bytes)."""
    raw = name.encode("utf-8", "replace")[: TASK_COMM_LEN - 1]
    return _prctl(PR_SET_NAME, raw)  # ctypes passes bytes as a NUL-terminated char*


def enable_tcp_migrate_req() -> bool:
    """Ask the kernel to move queued connections off a closed SO_REUSEPORT socket.

    Without it, connections waiting in the queue of a removed worker slot (SIGTTOU) are reset.
    The sysctl is per network namespace and needs privileges; failure is expected and fine.
    """
    try:
        with open(MIGRATE_REQ) as current:
            if current.read().strip() == "1":
                return True
        with open(MIGRATE_REQ, "w") as knob:
            knob.write("1")
        return True
    except OSError:
        return False
