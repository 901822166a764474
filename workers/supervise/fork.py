"""Forking a worker and collecting its exit, the parts of process life that need care.

- Output buffered in the master is flushed first, or the child would print it again.
- The master's signals stay blocked across ``fork()``: a signal in the child's first instants
  must neither run the master's handlers there nor be lost; the child unblocks them once it
  has installed its own (see ``workers.supervise.worker``).
- The child never returns into the master's stack: whatever happens it leaves through
  ``os._exit``, so the master's ``finally`` blocks and ``atexit`` hooks (which remove the Unix
  socket file, for one) never run in a worker.
- Exits are collected by pid, never with ``waitpid(-1)``, so processes the application spawns
  in the master keep their exit status for whoever waits for them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import NoReturn

from workers.supervise.worker import BOOT_FAILED, Target, WorkerSetup, run_worker

__all__ = ["describe_exit", "fork_worker", "poll_exit"]


def fork_worker(
    setup: WorkerSetup,
    target: Target,
    *,
    blocked: Iterable[int],
    in_child: Callable[[], None],
) -> int:
    """Fork a worker running ``target``; returns its pid (OSError if fork fails).

    ``in_child`` runs first in the child to drop what only the master may hold.
    """
    _flush_output()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        pid = os.fork()
        if pid == 0:
            _child(setup, target, in_child)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return pid


def _child(setup: WorkerSetup, target: Target, in_child: Callable[[], None]) -> NoReturn:
    status = BOOT_FAILED
    try:
        in_child()
        status = run_worker(setup, target)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def poll_exit(pid: int) -> int | None:
    """The exit code of child ``pid`` if it has exited (negative: killed by that signal)."""
    try:
        reaped, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return 0  # already collected elsewhere; it is gone either way
    return os.waitstatus_to_exitcode(status) if reaped else None


def describe_exit(code: int) -> str:
    """``exit code 3`` or ``signal SIGKILL``, for log lines."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _flush_output() -> None:
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
