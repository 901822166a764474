"""Bus and store throughput across real pre-forked workers (no HTTP, no wrk).

    python load_tests/bench_bus.py                    # bus: 1 publisher -> 3 subscribers
    python load_tests/bench_bus.py --mode store       # store round trips, every worker

Bus mode starts a `workers.supervise.master.Master` with 4 workers. Worker 0 publishes `--size`-byte
messages as fast as the bus takes them for `--duration` seconds; workers 1-3 count what they
receive. Each worker reports its count through the shared store once it is done; the
figure is deliveries per second to the *other* workers (local delivery is a function call
and is not counted). The bar is >= 200 000 deliveries/s.

Store mode runs `--greenlets` greenlets per worker doing GET/SET pairs against the
cross-worker store (the shared table; the master only for what does not fit) and reports
operations per second in total.

Nothing is pinned: the master's state server thread, 4 workers and the publisher share the
machine's cores, as they would in production. Repeat three times and take the median.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.shared.state import LocalState, StateOps
from workers.shared.table_store import TableStore
from workers.supervise.config import MasterConfig
from workers.supervise.context import WorkerContext
from workers.supervise.master import Master

ARGS = argparse.Namespace()


def bus_target(ctx: WorkerContext) -> None:
    """Worker 0 publishes; the others count deliveries; all report through the store."""
    import gevent

    import workers.shared.bus
    import workers.shared.state

    bus = workers.shared.bus.bus()
    store = workers.shared.state.client()
    assert bus is not None and store is not None
    received = 0

    def on_message(payload: bytes) -> None:
        nonlocal received
        received += 1

    bus.subscribe("bench", on_message)
    ctx.ready()
    store.incr("ready", 1)
    while int(store.get("ready") or b"0") < ARGS.workers:
        gevent.sleep(0.01)
    if ctx.worker_id == 0:
        payload = b"x" * ARGS.size
        started = time.monotonic()
        deadline = started + ARGS.duration
        sent = 0
        while time.monotonic() < deadline:
            for _ in range(256):
                bus.publish("bench", payload)
            sent += 256
            gevent.sleep(0)
        store.set("sent", str(sent).encode())
        store.set("started", repr(started).encode())
        bus.publish("bench-done", b"")
    else:
        done = gevent.event.Event()
        bus.subscribe("bench-done", lambda _payload: done.set())
        done.wait(ARGS.duration + 30)
        # Until the last message arrived here, not until the publisher stopped.
        store.set(f"finished-at-{ctx.worker_id}", repr(time.monotonic()).encode())
        store.incr("received", received)
    store.incr("finished", 1)
    ctx.wait_stop()


def store_target(ctx: WorkerContext) -> None:
    """Every worker runs greenlets doing GET/SET pairs; counts go to the store."""
    import gevent

    import workers.shared.state

    store = workers.shared.state.client()
    assert store is not None
    ctx.ready()
    store.incr("ready", 1)
    while int(store.get("ready") or b"0") < ARGS.workers:
        gevent.sleep(0.01)
    deadline = time.monotonic() + ARGS.duration
    count = 0

    def loop(n: int) -> None:
        nonlocal count
        key = f"k{ctx.worker_id}-{n}"
        while time.monotonic() < deadline:
            store.set(key, b"v" * 200, 60)
            store.get(key)
            count += 2

    cpu = time.process_time()
    gevent.joinall([gevent.spawn(loop, n) for n in range(ARGS.greenlets)])
    cpu = time.process_time() - cpu
    store.incr("received", count)
    store.incr("worker-cpu-us", int(cpu * 1e6))
    store.incr("finished", 1)
    ctx.wait_stop()


def results_store(master: Master) -> StateOps:
    """The store the workers report to, as the master sees it: the shared table in front of
    the state server's own store (see workers.shared.table_store)."""
    state = master._state
    own = LocalState(state.store)
    return own if state.table is None else TableStore(state.table, own)


def master_cpu() -> float:
    """CPU seconds used so far by this process (the master and its state server thread)."""
    return time.process_time()


def main() -> int:
    """Run one benchmark and print its figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("bus", "store"), default="bus")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--greenlets", type=int, default=16)
    parser.parse_args(namespace=ARGS)
    target = bus_target if ARGS.mode == "bus" else store_target
    master = Master(MasterConfig(binds=["127.0.0.1:0"], workers=ARGS.workers), target)
    master.start()
    store = results_store(master)
    deadline = time.monotonic() + ARGS.duration + 60
    while int(store.get("finished") or b"0") < ARGS.workers and time.monotonic() < deadline:
        time.sleep(0.1)
    received = int(store.get("received") or b"0")
    if ARGS.mode == "bus":
        sent = int(store.get("sent") or b"0")
        started = float(store.get("started") or b"0")
        ends = [float(store.get(f"finished-at-{i}") or b"0") for i in range(1, 99)]
        elapsed = max(ends) - started
        others = ARGS.workers - 1
        print(f"published {sent} x {ARGS.size} B in {elapsed:.2f} s to {others} other workers")
        print(f"delivered {received} of {sent * others} ({received / max(1, sent * others):.4%})")
        print(f"deliveries/s: {received / elapsed:,.0f}   (bar: >= 200,000)")
    else:
        cpu = int(store.get("worker-cpu-us") or b"0")
        print(
            f"store operations/s: {received / ARGS.duration:,.0f} "
            f"({ARGS.workers} workers x {ARGS.greenlets} greenlets, SET+GET pairs); "
            f"worker CPU per operation: {cpu / max(1, received):.1f} us; master CPU "
            f"per operation: {master_cpu() * 1e6 / max(1, received):.1f} us"
        )
    master.stop()
    master.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
