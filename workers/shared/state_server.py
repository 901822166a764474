"""The master's state server: one thread that owns the store and relays the bus.

Most store operations never come here: workers run them on the shared table the server makes before
the first fork (``workers.shared.table``, ``workers.shared.table_store``). This thread's store holds
what the table has no room for (values over 4 KiB, and the entries it demoted: the written
longest ago of a group full of live ones), and the worker that needs such a key asks for it as
below. With ``SOCKETIFY_STATE_TABLE=0`` in the master's
environment there is no table and this thread serves every operation.

Both are bounded, as set in the master's environment: ``SOCKETIFY_STATE_TABLE_MB`` (about 100 MiB by
default, see ``workers.shared.table.DEFAULT_GROUPS``) sizes the table, whose pages count in a
process's memory only once touched; ``SOCKETIFY_STATE_MASTER_MB`` (64) caps this thread's store.
The table never drops a live entry: what it demotes or cannot hold comes here, and this store
evicts entries with a TTL only when it is full itself, written-longest-ago first; a value without a
TTL never is, and one that finds no room is refused with an error. Between turns the thread also
sweeps the table a few groups at a time (``workers.shared.table_upkeep``, which never waits for a
lock) so that expired entries leave it ahead of need.

Theory of operation
-------------------
For every worker process it forks, the master first calls ``attach(record)``, which makes a
pair of rings (``workers.shared.shm``): *up* (worker -> master) and *down* (master -> worker). The
pair goes to the child in its ``WorkerSetup``; ``detach(record)`` drops it once the worker is
reaped. One thread, started before the first fork, sleeps in ``epoll`` on the up rings'
eventfds and, turn after turn:

- answers store requests from its ``KeyValueStore``. One thread applies every operation in
  arrival order, so each is atomic and a value written by one worker (whose client waits for
  the answer) is what any worker reads next: read-your-writes across workers;
- copies each publish record, unchanged, into every *other* worker's down ring, in the order
  it was read, so each publisher's messages reach each worker once and in order.

A down ring that is full (a worker busy or stuck) gets a per-worker backlog in the master, in
order, flushed as the worker catches up; past ``BACKLOG_LIMIT`` bytes that worker's bus
messages are dropped with an error log (its heartbeat will have it replaced), answers never.

The store lives in the master, so no worker crash loses anything: a worker killed mid-write
leaves an incomplete record that was never published (see ``workers.shared.shm``). A failing
operation is answered with an error; an unexpected failure of the loop is logged and the
loop starts again with the store intact. The master must stay free of gevent, asyncio and
concurrent.futures; this module uses a plain ``threading.Thread``. The child side of a fork
drops everything here except its own rings (``os.register_at_fork``), and never runs the
thread (threads do not survive ``fork()``).
"""

from __future__ import annotations

import logging
import math
import os
import select
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass

from workers.shared import wire
from workers.shared.kvstore import DEFAULT_MAX_BYTES, KeyValueStore
from workers.shared.shm import Ring, RingFull
from workers.shared.table import SharedTable, groups_for
from workers.shared.table_upkeep import sweep
from workers.shared.wire import Op, Status

__all__ = ["Endpoint", "StateServer"]

log = logging.getLogger("socketify.state")

RING_CAPACITY = 4 << 20
MAX_RECORD = 1 << 20
BACKLOG_LIMIT = 64 << 20
IDLE_WAIT = Ring.WAIT_BOUND  # seconds: bounds a lost wake-up (see workers.shared.shm)
BACKLOG_WAIT = 0.001  # poll period while some worker has a backlog to flush
TABLE_ENV = "SOCKETIFY_STATE_TABLE"  # "0": no shared table, the master serves every operation
TABLE_MB_ENV = "SOCKETIFY_STATE_TABLE_MB"  # the table's size in MiB
MASTER_MB_ENV = "SOCKETIFY_STATE_MASTER_MB"  # the capacity of this thread's store in MiB
TABLE_SWEEP_EVERY = 30.0  # seconds from one sweep of the whole table to the next
TABLE_SWEEP_BATCH = 32  # groups swept per turn of the loop (about a millisecond)


@dataclass(frozen=True)
class Endpoint:
    """A worker's rings (it writes ``up`` and reads ``down``) and the table all workers share."""

    up: Ring
    down: Ring
    table: SharedTable | None = None


class _Peer:
    __slots__ = ("backlog", "backlog_bytes", "carry", "endpoint", "record", "touched")

    def __init__(self, record: int, endpoint: Endpoint) -> None:
        self.record = record
        self.endpoint = endpoint
        self.backlog: deque[bytes] = deque()
        self.backlog_bytes = 0
        self.touched = False
        self.carry: list[bytes] = []  # requests read by a pass's second look, for the next


class StateServer:
    """Master side of the cross-worker store and bus (see the module docstring)."""

    def __init__(
        self,
        ring_capacity: int = RING_CAPACITY,
        max_record: int = MAX_RECORD,
        store: KeyValueStore | None = None,
        table: SharedTable | None = None,
    ) -> None:
        self.store = store if store is not None else KeyValueStore(max_bytes=_master_bytes())
        # orkers run most store operations on this table themselves
        # (``workers.shared.table_store``); this thread's store holds what does not fit there.
        self.table = table if table is not None else _make_table()
        self._ring_capacity = ring_capacity
        self._max_record = max_record
        self._lock = threading.Lock()  # guards _changes between the main thread and ours
        self._changes: list[tuple[int, Endpoint | None]] = []
        self._endpoints: dict[int, Endpoint] = {}  # main thread's view, for fork cleanup
        self._peers: dict[int, _Peer] = {}  # the server thread's view
        self._by_fd: dict[int, _Peer] = {}
        self._epoll = select.epoll()
        self._control = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._epoll.register(self._control, select.EPOLLIN)
        self._thread: threading.Thread | None = None
        self._running = False
        self._forking: Endpoint | None = None
        self._sweep_cursor = 0
        self._next_sweep = time.monotonic() + TABLE_SWEEP_EVERY
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _child_of(ref))

    # -- main thread -------------------------------------------------------------------------

    def after_fork_in_child(self) -> None:
        """In a forked child: keep only the rings made for it, and never run the thread."""
        keep = self._forking
        self._thread = None
        self._running = False
        for endpoint in [*self._endpoints.values(), *(p.endpoint for p in self._peers.values())]:
            if endpoint is not keep:
                _close(endpoint)
        self._endpoints.clear()
        self._peers.clear()
        self._by_fd.clear()
        if self._control >= 0:
            self._epoll.close()
            os.close(self._control)
            self._control = -1

    def start(self) -> None:
        """Start the server thread (before the first fork)."""
        if self._thread is not None:
            return
        self._running = True
        self._thread = threading.Thread(target=self._run, name="socketify-state", daemon=True)
        self._thread.start()

    def attach(self, record: int) -> Endpoint:
        """Make the rings of the worker about to be forked with heartbeat ``record``."""
        endpoint = Endpoint(
            Ring(self._ring_capacity, self._max_record),
            Ring(self._ring_capacity, self._max_record),
            self.table,
        )
        old = self._endpoints.pop(record, None)
        if old is not None:
            self._change(record, None)
        self._endpoints[record] = endpoint
        self._forking = endpoint
        self._change(record, endpoint)
        return endpoint

    def detach(self, record: int) -> None:
        """Forget the rings of a worker that is gone."""
        if self._endpoints.pop(record, None) is not None:
            self._change(record, None)

    def stop(self) -> None:
        """Stop the thread and release every ring."""
        self._running = False
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._apply_changes()
        for endpoint in self._endpoints.values():
            _close(endpoint)
        self._endpoints.clear()
        if self._control >= 0:
            self._epoll.close()
            os.close(self._control)
            self._control = -1
        if self.table is not None:
            self.table.close()

    def _change(self, record: int, endpoint: Endpoint | None) -> None:
        with self._lock:
            self._changes.append((record, endpoint))
        if self._thread is None:
            self._apply_changes()
        else:
            self._wake()

    def _wake(self) -> None:
        if self._control >= 0:
            os.eventfd_write(self._control, 1)

    # -- the server thread -------------------------------------------------------------------

    def _run(self) -> None:
        while self._running:
            try:
                self._serve()
            except Exception:
                log.exception("state server loop failed; restarting it (the store is intact)")

    def _serve(self) -> None:
        while self._running:
            self._apply_changes()
            self._sweep_table()
            if self._pump():
                continue
            peers = list(self._peers.values())
            if any(not p.endpoint.up.prepare_wait() for p in peers):
                continue
            wait = BACKLOG_WAIT if any(p.backlog for p in peers) else IDLE_WAIT
            for fd, _ in self._epoll.poll(wait):
                peer = self._by_fd.get(fd)
                if peer is not None:
                    peer.endpoint.up.clear_notification()
                elif fd == self._control:
                    try:
                        os.eventfd_read(self._control)
                    except BlockingIOError:
                        pass

    def _sweep_table(self) -> None:
        """Sweep the next few groups of the table when a sweep is due."""
        if self.table is None:
            return
        now = time.monotonic()
        if not self._sweep_cursor and now < self._next_sweep:
            return
        self._sweep_cursor = sweep(self.table, now, self._sweep_cursor, TABLE_SWEEP_BATCH)
        if not self._sweep_cursor:
            self._next_sweep = now + TABLE_SWEEP_EVERY

    def _apply_changes(self, attach_only: bool = False) -> None:
        with self._lock:
            changes = self._changes
            if attach_only:
                # Detachments wait, and so does anything queued behind one for the same
                # record (its order matters); attachments of other records go ahead, so a
                # worker attached after some other worker left still gets every publish.
                now: list[tuple[int, Endpoint | None]] = []
                later: list[tuple[int, Endpoint | None]] = []
                for change in changes:
                    waits = change[1] is None or any(r == change[0] for r, _ in later)
                    (later if waits else now).append(change)
                changes, self._changes = now, later
            else:
                self._changes = []
        for record, endpoint in changes:
            peer = self._peers.pop(record, None)
            if peer is not None:
                fd = peer.endpoint.up.notify_fd
                self._by_fd.pop(fd, None)
                if fd >= 0:
                    self._epoll.unregister(fd)
                _close(peer.endpoint)
            if endpoint is not None:
                peer = _Peer(record, endpoint)
                self._peers[record] = peer
                self._by_fd[endpoint.up.notify_fd] = peer
                self._epoll.register(endpoint.up.notify_fd, select.EPOLLIN)

    def _pump(self) -> int:
        """One pass over every up ring; returns how many records were handled.

        A request may follow, causally, a write posted by another worker (see ``post`` in
        ``workers.shared.link``) that was published before the request was. So when the first read
        of the rings finds requests, every ring is read once more, which brings in every such
        write, and posted writes are applied before anything is answered. Requests found by
        that second read wait for the next pass, which gives them the same guarantee.
        """
        peers = list(self._peers.values())
        for peer in peers:
            if peer.backlog:
                self._flush_backlog(peer)
        early = [(peer, peer.carry + peer.endpoint.up.drain(256)) for peer in peers]
        late: list[list[bytes]] = [[] for _ in peers]
        if any(_answered(r) for _, records in early for r in records):
            late = [peer.endpoint.up.drain(256) for peer in peers]
        # A worker attached before these records were published must get them: pick up such
        # attachments now (detachments wait for the next turn, their rings stay open).
        self._apply_changes(attach_only=True)
        targets = list(self._peers.values())
        handled = 0
        for (peer, records), more in zip(early, late, strict=True):
            peer.carry = [r for r in more if _answered(r)]
            for record in (*records, *more):
                if record[0] == wire.REQUEST and not _answered(record):
                    self._answer(record)
        for (peer, records), more in zip(early, late, strict=True):
            handled += len(records) + len(more)
            for record in (*records, *more):
                kind = record[0]
                if kind == wire.PUBLISH:
                    for other in targets:
                        if other is not peer:
                            self._deliver(other, record, droppable=True)
                elif kind != wire.REQUEST:
                    log.error("worker record %d sent an unknown record kind %r", peer.record, kind)
            for record in records:
                if _answered(record):
                    self._deliver(peer, self._answer(record), droppable=False)
        for peer in targets:
            if peer.touched:
                peer.touched = False
                peer.endpoint.down.notify()
        return handled  # > 0 while requests are carried over, so the loop comes back at once

    def _deliver(self, peer: _Peer, record: bytes, droppable: bool) -> None:
        peer.touched = True
        if not peer.backlog:
            try:
                peer.endpoint.down.try_put(record, notify=False)
                return
            except RingFull:
                pass
        if droppable and peer.backlog_bytes > BACKLOG_LIMIT:
            log.error("worker record %d is not reading the bus; dropping a message", peer.record)
            return
        peer.backlog.append(record)
        peer.backlog_bytes += len(record)

    def _flush_backlog(self, peer: _Peer) -> None:
        down = peer.endpoint.down
        backlog = peer.backlog
        while backlog:
            try:
                down.try_put(backlog[0], notify=False)
            except RingFull:
                break
            peer.backlog_bytes -= len(backlog.popleft())
            peer.touched = True

    # -- store operations --------------------------------------------------------------------

    def _answer(self, record: bytes) -> bytes:
        request_id, op, key, args = wire.decode_request(record)
        try:
            status, body = self._apply(op, key, args)
        except Exception as exc:
            if not request_id:
                log.error("a posted store operation %d on %r failed: %s", op, key, exc)
            return wire.encode_answer(request_id, Status.ERROR, str(exc).encode())
        return wire.encode_answer(request_id, status, body)

    def _apply(self, op: int, key: bytes, args: memoryview) -> tuple[Status, bytes]:
        store = self.store
        if op == Op.GET:
            value = store.get(key)
            return (Status.MISSING, b"") if value is None else (Status.OK, value)
        if op == Op.SET:
            (ttl,) = wire.F64.unpack_from(args)
            store.set(key, bytes(args[wire.F64.size :]), _ttl(ttl))
            return Status.OK, b""
        if op == Op.COMPARE_AND_SET:
            ttl, expected, value = wire.decode_compare_and_set(args)
            done = store.compare_and_set(key, expected, value, _ttl(ttl))
            return Status.OK, b"\x01" if done else b"\x00"
        if op == Op.DELETE:
            return Status.OK, b"\x01" if store.delete(key) else b"\x00"
        if op == Op.INCR:
            ttl, amount = wire.TTL_AND_AMOUNT.unpack_from(args)
            return Status.OK, wire.I64.pack(store.incr(key, amount, _ttl(ttl)))
        if op == Op.TAKE:
            capacity, refill, now = wire.BUCKET.unpack_from(args)
            allowed, left, wait = store.take(
                key, capacity, refill, None if math.isnan(now) else now
            )
            return Status.OK, wire.TAKEN.pack(allowed, left, wait)
        if op == Op.CLEAR_PREFIX:
            return Status.OK, wire.I64.pack(store.clear_prefix(key))
        if op == Op.COUNT_PREFIX:
            return Status.OK, wire.I64.pack(store.count_prefix(key))
        if op == Op.PING:
            return Status.OK, b""
        raise ValueError(f"unknown store operation {op}")


_NO_ANSWER = b"\x00\x00\x00\x00"  # request id 0: a posted write, applied but not answered


def _answered(record: bytes) -> bool:
    """Whether ``record`` is a request that waits for an answer."""
    return record[0] == wire.REQUEST and record[1:5] != _NO_ANSWER


def _ttl(value: float) -> float | None:
    return None if math.isnan(value) else value


def _make_table() -> SharedTable | None:
    if os.environ.get(TABLE_ENV, "1") == "0":
        return None  # every operation through this thread (to compare, or by choice)
    megabytes = _megabytes(TABLE_MB_ENV)
    try:
        return SharedTable() if megabytes is None else SharedTable(groups_for(megabytes))
    except (OSError, AttributeError) as exc:  # no memfd, or a C library without robust mutexes
        log.warning("no shared table (%s): every store operation goes to the master", exc)
        return None


def _master_bytes() -> int:
    megabytes = _megabytes(MASTER_MB_ENV)
    return DEFAULT_MAX_BYTES if megabytes is None else int(megabytes * (1 << 20))


def _megabytes(name: str) -> float | None:
    """A size in MiB from the environment variable ``name``; None when it is not set (or
    not a size: that is logged, and the default applies)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = math.nan
    if not 0 < megabytes < math.inf:
        log.error("%s=%r is not a positive number of MiB; using the default", name, text)
        return None
    return megabytes


def _close(endpoint: Endpoint) -> None:
    endpoint.up.close()
    endpoint.down.close()


def _child_of(ref: weakref.ReferenceType[StateServer]) -> None:
    server = ref()
    if server is not None:
        server.after_fork_in_child()
