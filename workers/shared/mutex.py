"""Robust process-shared pthread mutexes in shared memory, waited for cooperatively.

Theory of operation
-------------------
``make_mutexes`` initialises mutexes at given addresses of a ``MAP_SHARED`` mapping before
any fork, so every child of the process uses the same ones; they are called through
``ctypes``. An uncontended lock and unlock are two atomic instructions in the C library, no
system call. Nothing waits in the kernel: ``pthread_mutex_trylock``, a few quick retries,
then sleeps through the owner's ``pause`` (gevent's sleep in a worker: the other greenlets,
maybe the one holding the lock, run meanwhile), bounded by ``LOCK_TIMEOUT``. A greenlet that
holds a mutex across a wait keeps the other greenlets of its process out too, because a
mutex held by this thread is busy for this thread as well.

The mutexes are *robust*: when the owner dies, even by ``kill -9``, the kernel marks the
mutex (the robust futex list), and the next ``trylock`` succeeds with ``EOWNERDEAD``. The
taker then makes it consistent and calls its owner's ``owner_died``, which repairs whatever
the dead holder left half done, before going on with the lock held.

``trylock`` and ``unlock`` are exported for a caller's own fast path (a mutex's ``pointer``
is their argument); everyone else uses ``with mutex:``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from typing import Any, Protocol

__all__ = [
    "LOCK_TIMEOUT",
    "LockTimeout",
    "MutexOwner",
    "SharedMutex",
    "make_mutexes",
    "trylock",
    "unlock",
]

LOCK_TIMEOUT = 10.0  # seconds a caller waits for a lock before giving up (a stuck holder)
QUICK_TRIES = 32  # lock attempts before the first cooperative sleep
MUTEX_BYTES = 64  # room for a pthread_mutex_t (40 bytes on x86-64 glibc), one cache line
_PTHREAD_PROCESS_SHARED = 1
_PTHREAD_MUTEX_ROBUST = 1
try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
    # PERF: the lock calls run per store operation. Through PyDLL (the GIL kept: they never
    # block) with no argtypes, given prebuilt ``c_void_p`` objects, a trylock and unlock pair
    # costs about half what CDLL with argtypes and errno swapping does.
    _FAST: Any = ctypes.PyDLL(None)
    trylock: Any = _FAST.pthread_mutex_trylock
    unlock: Any = _FAST.pthread_mutex_unlock
    _consistent: Any = _FAST.pthread_mutex_consistent
except (OSError, AttributeError):  # a C library without robust mutexes
    _LIBC = trylock = unlock = _consistent = None


class LockTimeout(Exception):
    """A shared mutex stayed taken for ``LOCK_TIMEOUT`` seconds (its holder is stuck)."""


class MutexOwner(Protocol):
    """What a mutex asks of the structure it guards."""

    def pause(self, seconds: float) -> None:
        """Sleep while another process holds the mutex (cooperatively, in a worker)."""

    def owner_died(self, mutex: SharedMutex) -> None:
        """Repair what a holder that died left (called with ``mutex`` held)."""


class SharedMutex:
    """One robust process-shared mutex, as a context manager (cooperative waits)."""

    __slots__ = ("number", "owner", "pointer")

    def __init__(self, owner: MutexOwner, number: int, address: int) -> None:
        self.owner = owner
        self.number = number
        self.pointer = ctypes.c_void_p(address)

    def __enter__(self) -> None:
        failed = trylock(self.pointer)
        if failed:
            self.wait(failed)

    def __exit__(self, *_: object) -> None:
        unlock(self.pointer)

    def try_acquire(self) -> bool:
        """Take the mutex if nobody holds it, never waiting (``release`` it after)."""
        failed = trylock(self.pointer)
        if failed == errno.EOWNERDEAD:
            self.recover()
            return True
        return not failed

    def release(self) -> None:
        """Release the mutex (taken by ``try_acquire`` or ``wait``)."""
        unlock(self.pointer)

    def wait(self, failed: int) -> None:
        """Take the mutex after a ``trylock`` that answered ``failed`` (``LockTimeout``)."""
        deadline = 0.0
        pause = 0.00005
        tries = 0
        while True:
            if failed == errno.EOWNERDEAD:
                self.recover()
                return
            if failed != errno.EBUSY:
                raise OSError(failed, f"pthread_mutex_trylock: {os.strerror(failed)}")
            tries += 1
            if tries > QUICK_TRIES:
                # The holder is descheduled, slow, or a greenlet of this process waiting on
                # something: let this process's other greenlets run meanwhile.
                now = time.monotonic()
                if not deadline:
                    deadline = now + LOCK_TIMEOUT
                elif now > deadline:
                    raise LockTimeout(f"a shared lock stayed taken for {LOCK_TIMEOUT:g} s")
                self.owner.pause(pause)
                pause = min(0.0002, pause * 2)
            failed = trylock(self.pointer)
            if not failed:
                return

    def recover(self) -> None:
        """We hold the mutex of a holder that died: make it usable and repair the rest."""
        _consistent(self.pointer)
        self.owner.owner_died(self)


def make_mutexes(owner: MutexOwner, addresses: list[int]) -> list[SharedMutex]:
    """Initialise robust process-shared mutexes at ``addresses`` (before any fork)."""
    if _LIBC is None:
        raise OSError("the C library offers no robust process-shared mutexes")
    attr = ctypes.create_string_buffer(64)  # pthread_mutexattr_t is 4 bytes on glibc
    for call, args in (
        (_LIBC.pthread_mutexattr_init, ()),
        (_LIBC.pthread_mutexattr_setpshared, (_PTHREAD_PROCESS_SHARED,)),
        (_LIBC.pthread_mutexattr_setrobust, (_PTHREAD_MUTEX_ROBUST,)),
    ):
        if call(attr, *args):
            raise OSError(f"{call.__name__} failed: robust shared mutexes are unavailable")
    try:
        for address in addresses:
            failed = _LIBC.pthread_mutex_init(ctypes.c_void_p(address), attr)
            if failed:
                raise OSError(failed, f"pthread_mutex_init: {os.strerror(failed)}")
    finally:
        _LIBC.pthread_mutexattr_destroy(attr)
    return [SharedMutex(owner, n, address) for n, address in enumerate(addresses)]
