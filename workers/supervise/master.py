"""The pre-fork master: owns the sockets and shared memory, forks workers, then supervises.

Theory of operation
-------------------
``start()`` binds the listening sockets (one SO_REUSEPORT socket per worker slot for TCP, see
``workers.supervise.listeners``; or adopts the ones systemd passed, see
``workers.supervise.systemd``), creates the heartbeat table and a non-blocking wake-up pipe,
installs signal handlers, forks one worker per slot and loops until every worker has called
``ctx.ready()``. ``wait()`` keeps looping until the master has stopped.

Each turn of the loop sleeps on the wake-up pipe, which is written by signal handlers (they
only enqueue the signal), by ``stop()`` from any thread, and by workers when they become ready
or ask to be recycled; a timer tick bounds the sleep. Then it acts, in one place:

- signals: TERM/INT graceful stop, QUIT immediate stop, HUP reload, TTIN/TTOU one worker
  more/less, USR1 reopen log files (and forward to workers), CHLD just wakes the loop;
- reap exited workers (by pid, so children the application spawned are never stolen);
- read the heartbeat table: readiness, recycle requests, silent workers (SIGKILL);
- reconcile: every slot must have a worker of the serving generation; missing ones are forked
  (after a per-slot backoff if they crashed); a recycled worker is stopped once its
  replacement is ready. During a reload the next generation is forked alongside, and the old
  one is stopped gracefully only when every new worker is ready;
- tell systemd what changed (READY, RELOADING, STOPPING, STATUS) and feed its watchdog.

A worker that exits with BOOT_FAILED (or dies at all) before becoming ready while ``start()``
runs stops everything: ``start()`` raises ``BootError``. During a reload the same failure
abandons the new generation and the old one keeps serving.

This module must not import gevent, asyncio or concurrent.futures, even indirectly: forking a
process that holds their threads or hub state is unsafe. Workers import gevent after fork.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import time
from collections.abc import Callable
from enum import Enum
from signal import SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTTIN, SIGTTOU, SIGUSR1

from workers.shared.state_server import StateServer
from workers.supervise import linux
from workers.supervise.config import MasterConfig
from workers.supervise.exits import Outcome, judge_exit
from workers.supervise.fork import fork_worker, poll_exit
from workers.supervise.heartbeat import HeartbeatTable
from workers.supervise.listeners import Listeners
from workers.supervise.logfiles import reopen_log_files
from workers.supervise.reloader import MtimeWatcher
from workers.supervise.roster import Backoff, Roster, WorkerProc
from workers.supervise.signals import SignalQueue
from workers.supervise.status import ExitReason, MasterObserver, MasterStatus, WorkerStatus
from workers.supervise.systemd import Notifier, listen_sockets
from workers.supervise.worker import BOOT_FAILED, Target, WorkerSetup

__all__ = ["BOOT_FAILED", "BootError", "Master", "MasterConfig"]

log = logging.getLogger("socketify.master")

HANDLED_SIGNALS = (SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGTTIN, SIGTTOU, SIGUSR1, SIGCHLD)
DEFERRED_WHILE_BOOTING = frozenset({SIGHUP, SIGTTIN, SIGTTOU})  # acted on once workers are up
BUSY_TICK = 0.05  # loop period while something is starting, stopping or waiting to respawn
IDLE_TICK = 0.5
KILL_MARGIN = 1.0  # a draining worker gets graceful_timeout plus this before SIGKILL
QUICK_STOP_TIMEOUT = 2.0  # an immediate stop waits this long before SIGKILL
RELOAD_POLL = 1.0
BOOT_ALLOWANCE = 30.0  # a booting worker imports the app before it can beat; give it this long


class BootError(RuntimeError):
    """A worker failed to boot while the master was starting; everything was stopped."""


class Phase(Enum):
    """The master's life cycle."""

    NEW = "new"
    BOOTING = "booting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Master:
    """Pre-forks workers that each run ``target(ctx)`` and keeps them alive until stopped."""

    def __init__(
        self, config: MasterConfig, target: Target, observer: MasterObserver | None = None
    ) -> None:
        self.config = config
        self._target = target
        self._observer = observer  # metrics and health: see workers.supervise.status
        self._phase = Phase.NEW
        self._inbox = SignalQueue()
        self._deferred: list[int] = []
        self._roster = Roster()
        self._backoff = Backoff()
        self._listeners: Listeners | None = None
        self._table: HeartbeatTable | None = None
        self._state = StateServer()  # the cross-worker store and bus, served by a thread
        self._slots = config.worker_count
        self._generation = 1  # the generation that serves
        self._next_generation = 2
        self._reloading: int | None = None  # the generation being started by a reload
        self._stop_graceful = True
        self._exit_code = 0
        self._boot_error: str | None = None
        self._watcher: MtimeWatcher | None = None
        self._next_reload_poll = 0.0
        self._sd = Notifier.from_env()  # sd_notify and the watchdog; inert outside systemd

    # -- public API --------------------------------------------------------------------------

    @property
    def addresses(self) -> list[tuple[str, int] | str]:
        """Bound addresses in bind order: ``(host, port)`` for TCP, a path for Unix sockets."""
        return list(self._listeners.addresses) if self._listeners else []

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the live worker processes (serving, booting or draining), by slot."""
        return [w.pid for w in sorted(self._roster, key=lambda w: (w.slot, w.generation))]

    @property
    def status(self) -> MasterStatus:
        """The phase and the workers right now (a frozen snapshot)."""
        return MasterStatus(
            phase=self._phase.value,
            reloading=self._reloading is not None,
            workers=tuple(_worker_status(w) for w in self._roster),
        )

    @property
    def worker_count(self) -> int:
        """How many worker slots the master currently maintains."""
        return self._slots

    def run(self) -> int:
        """Start, supervise until stopped, and return the process exit code."""
        try:
            self.start()
        except BootError as exc:
            log.error("%s", exc)
            return BOOT_FAILED
        return self.wait()

    def start(self) -> None:
        """Bind, fork the workers and return once each one is ready.

        Raises ``BindError`` if an address cannot be bound and ``BootError`` if a worker
        failed to boot (after stopping the others). Returns early if a stop is requested.
        """
        if self._phase is not Phase.NEW:
            raise RuntimeError("Master.start() may only be called once")
        self._phase = Phase.BOOTING
        if not self._inbox.install(HANDLED_SIGNALS):
            log.debug("master not in the main thread; only stop() can reach it")
        try:
            self._listeners = Listeners(
                self.config.binds,
                slots=self._slots,
                backlog=self.config.backlog,
                unix_mode=self.config.unix_socket_mode,
                inherited=listen_sockets(),
            )
            self._table = HeartbeatTable(capacity=self.config.record_capacity)
            self._state.start()
        except BaseException:
            self._phase = Phase.STOPPED
            self._cleanup()
            raise
        if self._listeners.has_tcp and not linux.enable_tcp_migrate_req():
            log.debug("net.ipv4.tcp_migrate_req unavailable: removing a slot resets its queue")
        linux.set_process_name(self.config.proc_name)
        if self.config.reload:
            self._watcher = MtimeWatcher(self.config.reload_dirs)
            log.info("watching %s for changes", ", ".join(self._watcher.dirs))
        while self._phase is Phase.BOOTING:
            self._guarded_step()
            if self._phase is Phase.BOOTING and self._all_ready(self._generation):
                self._phase = Phase.RUNNING
                for signum in self._deferred:
                    self._inbox.push(signum)
                self._deferred.clear()
                log.debug("all %d workers ready", self._slots)
        self._publish()
        if self._boot_error is not None:
            self.wait()
            raise BootError(self._boot_error)

    def wait(self) -> int:
        """Supervise until stopped; returns the exit code (0, or BOOT_FAILED)."""
        if self._phase is Phase.NEW:
            raise RuntimeError("Master.wait() called before start()")
        while self._phase is not Phase.STOPPED:
            self._guarded_step()
        self._cleanup()
        return self._exit_code

    def stop(self, graceful: bool = True) -> None:
        """Ask the master to stop (from any thread or a signal handler); ``wait()`` returns."""
        self._inbox.push(SIGTERM if graceful else SIGQUIT)

    # -- the loop ----------------------------------------------------------------------------

    def _guarded_step(self) -> None:
        try:
            self._step()
        except BaseException:
            # A bug in the loop must not leave workers serving without a master.
            for proc in self._roster:
                proc.kill()
            self._phase = Phase.STOPPED
            self._cleanup()
            raise

    def _step(self) -> None:
        self._inbox.sleep(self._sd.sleep_bound(BUSY_TICK if self._busy() else IDLE_TICK))
        self._handle_signals()
        self._reap()
        now = time.monotonic()
        self._read_table(now)
        self._enforce_deadlines(now)
        if self._phase is Phase.RUNNING:
            self._poll_reloader(now)
        if self._phase in (Phase.BOOTING, Phase.RUNNING):
            self._reconcile(now)
        if self._phase is Phase.STOPPING and not len(self._roster):
            self._phase = Phase.STOPPED
        self._publish()

    def _publish(self) -> None:
        # Tell systemd and the observer (metrics, health probes) what changed.
        if self._observer is not None:
            self._observer.on_status(self.status)
        self._sd.observe(self._phase.value, self._reloading, self._slots, self._roster, self._table)

    def _busy(self) -> bool:
        if self._phase is not Phase.RUNNING or self._reloading is not None:
            return True
        if self._backoff.waiting(time.monotonic()):
            return True
        return any(not w.ready or not w.serving for w in self._roster)

    def _handle_signals(self) -> None:
        actions: dict[int, Callable[[], None]] = {
            SIGTERM: lambda: self._begin_stop(graceful=True),
            # A second Ctrl-C during a graceful stop means "now".
            SIGINT: lambda: self._begin_stop(graceful=self._phase is not Phase.STOPPING),
            SIGQUIT: lambda: self._begin_stop(graceful=False),
            SIGHUP: lambda: self._begin_reload("SIGHUP"),
            SIGTTIN: self._add_slot,
            SIGTTOU: self._remove_slot,
            SIGUSR1: self._reopen_logs,
        }
        while (signum := self._inbox.pop()) is not None:
            if self._phase is Phase.BOOTING and signum in DEFERRED_WHILE_BOOTING:
                self._deferred.append(signum)
            elif signum in actions:
                actions[signum]()

    def _begin_stop(self, graceful: bool) -> None:
        if self._phase is Phase.STOPPED:
            return
        if self._phase is Phase.STOPPING and (graceful or not self._stop_graceful):
            return
        log.info("stopping %s", "gracefully" if graceful else "immediately")
        if self._phase is not Phase.STOPPING and self._listeners is not None:
            # Workers close their copies on SIGTERM; once the master's go too, new clients are
            # refused at once instead of waiting in a queue nobody will ever accept from.
            self._listeners.close()
        self._phase = Phase.STOPPING
        self._stop_graceful = graceful
        self._reloading = None
        for proc in self._roster:
            self._stop_worker(proc, graceful)

    def _reopen_logs(self) -> None:
        count = reopen_log_files()
        log.info("reopened %d log file(s); forwarding SIGUSR1 to workers", count)
        for proc in self._roster:
            proc.send(SIGUSR1)

    # -- scaling and reload ------------------------------------------------------------------

    def _add_slot(self) -> None:
        if self._phase is not Phase.RUNNING or self._listeners is None or self._table is None:
            return
        if 2 * (self._slots + 1) > self._table.capacity:
            log.warning("SIGTTIN ignored: already at the maximum of %d workers", self._slots)
            return
        try:
            slot = self._listeners.add_slot()
        except OSError as exc:
            log.error("SIGTTIN failed: %s", exc)
            return
        self._slots = slot + 1
        log.info("SIGTTIN: increasing to %d workers", self._slots)

    def _remove_slot(self) -> None:
        if self._phase is not Phase.RUNNING or self._listeners is None:
            return
        if self._slots <= 1:
            log.warning("SIGTTOU ignored: at least one worker must remain")
            return
        self._slots -= 1
        self._backoff.forget(self._slots)
        # The slot's workers get SIGTERM from _reconcile and close their copies; the master's
        # copy goes now, so the socket leaves the SO_REUSEPORT group and gets no new clients.
        self._listeners.remove_slot()
        log.info("SIGTTOU: decreasing to %d workers", self._slots)

    def _begin_reload(self, reason: str) -> None:
        if self._phase is not Phase.RUNNING:
            return
        if self._reloading is not None:
            log.info("%s during a reload: restarting it", reason)
            self._abandon_reload()
        self._reloading = self._next_generation
        self._next_generation += 1
        log.info("%s: reloading, starting generation %d", reason, self._reloading)

    def _abandon_reload(self) -> None:
        # Graceful: a new worker that is already ready may have accepted connections.
        for proc in self._roster:
            if proc.generation == self._reloading and not proc.stop_sent:
                self._stop_worker(proc, graceful=True)
        self._reloading = None

    def _poll_reloader(self, now: float) -> None:
        if self._watcher is None or now < self._next_reload_poll:
            return
        self._next_reload_poll = now + RELOAD_POLL
        changed = self._watcher.changed()
        if changed:
            more = f" (+{len(changed) - 1} more)" if len(changed) > 1 else ""
            self._begin_reload(f"{changed[0]}{more} changed")

    # -- reconciliation ----------------------------------------------------------------------

    def _all_ready(self, generation: int) -> bool:
        return all(
            any(w.ready for w in self._roster.serving(slot, generation))
            for slot in range(self._slots)
        )

    def _reconcile(self, now: float) -> None:
        for proc in self._roster:
            if proc.slot >= self._slots and not proc.stop_sent:
                self._stop_worker(proc, graceful=True)
        for slot in range(self._slots):
            serving = self._roster.serving(slot, self._generation)
            if not serving:
                if self._backoff.ready(slot, now):
                    self._spawn(slot, self._generation)
            elif any(w.ready for w in serving):
                for proc in self._roster.in_slot(slot):
                    if proc.retiring and not proc.stop_sent:
                        self._stop_worker(proc, graceful=True)  # its replacement is ready
        if self._reloading is not None:
            self._advance_reload()

    def _advance_reload(self) -> None:
        generation = self._reloading
        assert generation is not None
        for slot in range(self._slots):
            if not self._roster.serving(slot, generation):
                self._spawn(slot, generation)
                if self._reloading is None:
                    return  # the fork failed and the reload was abandoned
        if not self._all_ready(generation):
            return
        self._generation, self._reloading = generation, None
        for proc in self._roster:
            if proc.generation < generation and not proc.stop_sent:
                self._stop_worker(proc, graceful=True)
        log.info("reload complete: generation %d serving", generation)

    # -- heartbeat table and deadlines -------------------------------------------------------

    def _read_table(self, now: float) -> None:
        table = self._table
        if table is None:
            return
        for proc in self._roster:
            record = table.read(proc.record)
            if record.ready and not proc.ready:
                proc.ready = True
                log.debug("%s ready", proc.describe())
            if record.retiring and not proc.retiring:
                proc.retiring = True
                log.info("%s served %d requests; recycling", proc.describe(), record.requests)
            timeout = self.config.timeout
            if timeout and not proc.stop_sent and not proc.killed:
                if not proc.ready:
                    timeout = max(timeout, BOOT_ALLOWANCE)
                silent = now - record.last_beat
                if silent > timeout:
                    message = "%s silent for %.1fs (timeout %gs); killing it"
                    log.error(message, proc.describe(), silent, timeout)
                    proc.timed_out = True
                    proc.kill()

    def _enforce_deadlines(self, now: float) -> None:
        for proc in self._roster:
            if proc.kill_at is not None and now >= proc.kill_at and not proc.killed:
                log.warning("%s still running after its stop deadline; killing it", proc.describe())
                proc.kill()

    # -- processes ---------------------------------------------------------------------------

    def _stop_worker(self, proc: WorkerProc, graceful: bool) -> None:
        wait = self.config.graceful_timeout + KILL_MARGIN if graceful else QUICK_STOP_TIMEOUT
        proc.stop(graceful, deadline=time.monotonic() + wait)

    def _spawn(self, slot: int, generation: int) -> None:
        assert self._table is not None and self._listeners is not None
        config = self.config
        try:
            record = self._table.allocate()
        except LookupError as exc:
            self._spawn_failed(slot, generation, exc)
            return
        limit = config.max_requests
        if limit:
            limit += random.randint(0, config.max_requests_jitter)
        setup = WorkerSetup(
            slot=slot,
            generation=generation,
            record=record,
            sockets=tuple(self._listeners.sockets_for(slot)),
            table=self._table,
            master_pid=os.getpid(),
            notify_fd=self._inbox.notify_fd,
            timeout=config.timeout,
            graceful_timeout=config.graceful_timeout,
            max_requests=limit,
            proc_name=config.proc_name,
            state=self._state.attach(record),
        )
        try:
            pid = fork_worker(
                setup,
                self._target,
                blocked=HANDLED_SIGNALS,
                in_child=functools.partial(self._drop_master_state, slot),
            )
        except OSError as exc:
            self._table.release(record)
            self._state.detach(record)
            self._spawn_failed(slot, generation, exc)
            return
        self._roster.add(WorkerProc(pid, slot, generation, record, time.monotonic()))
        log.debug("booting worker %d (pid %d, generation %d)", slot, pid, generation)

    def _spawn_failed(self, slot: int, generation: int, exc: Exception) -> None:
        log.error("cannot start worker %d: %s", slot, exc)
        if generation == self._reloading:
            log.error("reload abandoned; the old workers keep serving")
            self._abandon_reload()
        else:
            self._backoff.failed(slot, uptime=0.0, now=time.monotonic())

    def _drop_master_state(self, slot: int) -> None:
        # Runs in a new worker: the wake-up pipe's read end and the other slots' sockets are
        # the master's alone (see Listeners.close_except).
        self._inbox.close_reader()
        if self._observer is not None:
            self._observer.in_child()
        if self._listeners is not None:
            self._listeners.close_except(slot)

    def _reap(self) -> None:
        for proc in self._roster:
            code = poll_exit(proc.pid)
            if code is not None:
                self._roster.pop(proc.pid)
                self._state.detach(proc.record)
                if self._observer is not None:
                    # Before the record is released: the observer reads what it counted.
                    reason = None if self._phase is Phase.STOPPING else self._exit_reason(proc)
                    self._observer.on_worker_ended(_worker_status(proc), reason)
                if self._table is not None:
                    self._table.release(proc.record)
                self._on_exit(proc, code)

    def _exit_reason(self, proc: WorkerProc) -> ExitReason:
        if proc.timed_out:
            return ExitReason.TIMEOUT
        if not proc.stop_sent:
            return ExitReason.CRASH
        if proc.retiring:
            return ExitReason.MAX_REQUESTS
        if proc.slot >= self._slots:
            return ExitReason.SCALE_DOWN
        return ExitReason.RELOAD

    def _on_exit(self, proc: WorkerProc, code: int) -> None:
        verdict = judge_exit(
            proc,
            code,
            booting=self._phase is Phase.BOOTING,
            stopping=self._phase is Phase.STOPPING,
            reloading=self._reloading,
        )
        if verdict.outcome is Outcome.EXPECTED:
            log.debug("%s", verdict.message)
        elif verdict.outcome is Outcome.BOOT_FAILED:
            self._boot_error, self._exit_code = verdict.message, BOOT_FAILED
            self._begin_stop(graceful=False)
        elif verdict.outcome is Outcome.RELOAD_FAILED:
            log.error("%s", verdict.message)
            self._abandon_reload()
        else:
            now = time.monotonic()
            delay = self._backoff.failed(proc.slot, uptime=now - proc.spawned_at, now=now)
            respawn = f"; respawning in {delay:.1f}s" if proc.slot < self._slots else ""
            log.error("%s%s", verdict.message, respawn)

    # -- teardown ----------------------------------------------------------------------------

    def _cleanup(self) -> None:
        self._inbox.close()
        if self._observer is not None:
            self._observer.on_status(self.status)
            self._observer.close()
            self._observer = None
        self._state.stop()
        if self._listeners is not None:
            self._listeners.close()
        if self._table is not None:
            self._table.close()
            self._table = None


def _worker_status(proc: WorkerProc) -> WorkerStatus:
    return WorkerStatus(
        slot=proc.slot,
        pid=proc.pid,
        generation=proc.generation,
        record=proc.record,
        ready=proc.ready,
        serving=proc.serving,
    )
