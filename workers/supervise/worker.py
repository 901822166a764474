"""The first code a forked worker runs, before the target.

Theory of operation
-------------------
The master forks with its signals blocked, so nothing sent in the first microseconds is lost
or handled by the master's own handlers. The child then:

1. records stop signals in a list and unblocks them (a TERM that arrives while booting is
   replayed once gevent is up, so an early stop is honoured, not dropped);
2. asks the kernel for SIGTERM when the master dies (PR_SET_PDEATHSIG) and checks the master
   did not die during the fork;
3. monkey-patches the stdlib and reinitialises the hub: from here on every blocking call
   yields, and user code imported by the target sees the patched modules;
4. wraps its inherited listening sockets as cooperative sockets, installs gevent signal
   handlers (TERM graceful; QUIT and INT immediate; USR1 reopens log files) and starts the
   heartbeat greenlet, which also stops the worker if the master was replaced by a new parent;
5. calls ``target(ctx)``. Returning means the worker is done (exit 0). An exception before
   ``ctx.ready()`` means the worker could not boot: traceback on stderr, exit 3, and the master
   does not respawn in a loop. An exception after it: traceback, exit 1.

Stopping is cooperative (``ctx.wait_stop``), with a deadline: a graceful stop exits on its own
shortly after ``graceful_timeout``, an immediate one within a second, even if the target never
returns. gevent is imported only inside functions here: the master imports this module.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers.shared.state_server import Endpoint
from workers.supervise import linux
from workers.supervise.context import WorkerContext
from workers.supervise.heartbeat import HeartbeatTable
from workers.supervise.logfiles import reopen_log_files

__all__ = ["BOOT_FAILED", "Target", "WorkerSetup", "run_worker"]

log = logging.getLogger("socketify.worker")

BOOT_FAILED = 3  # exit status of a worker that failed before ctx.ready()
HARD_EXIT_MARGIN = 0.5  # a draining worker exits this long after graceful_timeout
QUICK_EXIT_GRACE = 1.0  # an immediate stop gives the target this long to return
IGNORED_SIGNALS = (signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGUSR2, signal.SIGWINCH)
STOP_SIGNALS: dict[int, bool] = {signal.SIGTERM: True, signal.SIGQUIT: False, signal.SIGINT: False}

Target = Callable[[WorkerContext], None]


@dataclass(frozen=True)
class WorkerSetup:
    """Everything the master hands a worker across fork."""

    slot: int
    generation: int
    record: int
    sockets: tuple[socket.socket, ...]
    table: HeartbeatTable
    master_pid: int
    notify_fd: int
    timeout: float
    graceful_timeout: float
    max_requests: int
    proc_name: str
    state: Endpoint | None = None  # rings to the master's state server (store and bus)


def run_worker(setup: WorkerSetup, target: Target) -> int:
    """Turn this freshly forked process into a gevent worker and run ``target``; returns the
    exit status (the caller must ``os._exit`` with it, never return into the master's code)."""
    ctx: WorkerContext | None = None
    try:
        early = _take_over_signals()
        linux.set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != setup.master_pid:
            early.append(signal.SIGTERM)  # the master died before prctl() took effect
        linux.set_process_name(f"{setup.proc_name}:w{setup.slot}")
        setup.table.set_pid(setup.record, os.getpid())
        ctx = _boot(setup, early)
        target(ctx)
        return 0
    except SystemExit as exc:
        return _exit_status(exc)
    except BaseException:
        traceback.print_exc()
        return 1 if ctx is not None and ctx.is_ready else BOOT_FAILED
    finally:
        _flush()


def _take_over_signals() -> list[int]:
    """Replace the master's handlers: record stop signals until gevent handles them."""
    early: list[int] = []
    for signum in (*STOP_SIGNALS, signal.SIGUSR1):
        signal.signal(signum, lambda received, _frame: early.append(received))
    for signum in IGNORED_SIGNALS:
        # Only the master acts on these; a HUP or TTIN sent to the whole process group must
        # not kill or suspend workers.
        signal.signal(signum, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    return early


def _boot(setup: WorkerSetup, early: list[int]) -> WorkerContext:
    _patch_all()
    import gevent

    gevent.reinit()
    if setup.state is not None:
        _join_state(setup.state)
    # After patching, socket.socket is gevent's cooperative class; adopt the inherited fds.
    sockets = [
        socket.socket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        for sock in setup.sockets
    ]
    ctx = WorkerContext(
        worker_id=setup.slot,
        generation=setup.generation,
        sockets=sockets,
        graceful_timeout=setup.graceful_timeout,
        max_requests=setup.max_requests,
        table=setup.table,
        record=setup.record,
        notify_fd=setup.notify_fd,
    )
    stopper = _Stopper(ctx)
    for signum, graceful in STOP_SIGNALS.items():
        stopper.watchers.append(gevent.signal_handler(signum, stopper.stop, graceful))
    stopper.watchers.append(gevent.signal_handler(signal.SIGUSR1, reopen_log_files))
    for signum in early:
        if signum == signal.SIGUSR1:
            reopen_log_files()
        else:
            stopper.stop(STOP_SIGNALS[signum])
    gevent.spawn(_heartbeat, setup, stopper)
    return ctx


def _patch_all() -> None:
    """gevent's `monkey.patch_all()`, safe in a child of a process with dead weak proxies.

    Patching walks `gc.get_objects()` looking for existing RLocks, and `isinstance` on a
    `weakref.proxy` whose referent is gone raises ReferenceError, which would fail the boot
    (seen with a large parent, e.g. `--preload` or a test process). Proxies are never locks,
    so they are left out of that walk.
    """
    import gc
    import weakref

    from gevent import monkey

    proxy_types = tuple(weakref.ProxyTypes)
    every_object = gc.get_objects

    def objects_but_proxies(*args: Any, **kwargs: Any) -> list[Any]:
        return [o for o in every_object(*args, **kwargs) if type(o) not in proxy_types]

    gc.get_objects = objects_but_proxies
    try:
        monkey.patch_all()
    finally:
        gc.get_objects = every_object


def _join_state(endpoint: Endpoint) -> None:
    """Start this worker's link to the master (``workers.shared.state``, ``workers.shared.bus``)."""
    from workers.shared import bus, state
    from workers.shared.link import Link

    link = Link(endpoint)
    state.install(link)
    bus.install(link)


class _Stopper:
    """Turns a stop request into ``ctx.request_stop`` plus a deadline to leave anyway."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.watchers: list[object] = []  # gevent signal watchers must stay referenced

    def stop(self, graceful: bool) -> None:
        """Request a stop; schedule the forced exit that bounds it."""
        import gevent

        if not self.ctx.request_stop(graceful):
            return
        if graceful:
            gevent.spawn_later(self.ctx.graceful_timeout + HARD_EXIT_MARGIN, _overran)
        else:
            gevent.spawn_later(QUICK_EXIT_GRACE, _hard_exit, 0)


def _heartbeat(setup: WorkerSetup, stopper: _Stopper) -> None:
    import gevent

    interval = min(setup.timeout / 4, 1.0) if setup.timeout > 0 else 1.0
    orphaned = False
    while True:
        setup.table.beat(setup.record)
        stopper.ctx.publish_requests()
        if not orphaned and os.getppid() != setup.master_pid:
            # PR_SET_PDEATHSIG normally fires first; this catches the cases it misses
            # (non-Linux, or the forking thread of the master exited).
            orphaned = True
            log.warning("worker %d: master %d is gone; stopping", setup.slot, setup.master_pid)
            stopper.stop(True)
        gevent.sleep(interval)


def _overran() -> None:
    log.warning("graceful_timeout exceeded; exiting with requests still in flight")
    _hard_exit(1)


def _hard_exit(status: int) -> None:
    _flush()
    os._exit(status)


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _flush() -> None:
    # The process leaves through os._exit (the master's atexit hooks must not run here), so
    # buffered output would otherwise be lost.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
