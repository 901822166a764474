"""Run greenlets against a socketify Database and print what they observed, as JSON.

    python gevent_sessions.py URL before|after

`after`: gevent patches first, then Pony is imported (a worker without --preload).
`before`: Pony is imported and the database bound first, then gevent patches (--preload,
workers=0); socketify.db must then rebuild Pony's state on greenlet-local storage.
"""

from __future__ import annotations

import json
import operator
import sys
import time

URL, ORDER = sys.argv[1], sys.argv[2]

if ORDER == "after":
    from gevent import monkey

    monkey.patch_all()

from pony.orm import Required, db_session, select  # noqa: E402

import socketify.db  # noqa: E402

db = socketify.db.connect(URL, pool_size=2, pool_timeout=0.3)


class Note(db.Entity):
    tag = Required(str)


db.generate_mapping(create_tables=True)

if ORDER == "before":
    from gevent import monkey

    monkey.patch_all()

import gevent  # noqa: E402

ticks = 0


def ticker() -> None:
    global ticks
    while True:
        gevent.sleep(0.005)
        ticks += 1


def session_isolation() -> dict[str, object]:
    """A and B each create a note and pause; A must not see B's uncommitted note."""
    seen: dict[str, list[str]] = {}

    def worker(tag: str, pause: float) -> None:
        with db_session:
            Note(tag=tag)
            time.sleep(pause)  # patched: yields to the other greenlet mid-session
            seen[tag] = sorted(n.tag for n in select(n for n in Note))

    gevent.joinall([gevent.spawn(worker, "a", 0.05), gevent.spawn(worker, "b", 0.1)])
    return seen


def cooperative_wait() -> dict[str, object]:
    """Pool of 2: a third greenlet waits for a connection while the hub keeps running."""
    order: list[str] = []

    def holder(name: str) -> None:
        with db_session:
            Note.select().count()
            order.append(f"{name} got")
            time.sleep(0.2)
        order.append(f"{name} released")

    def waiter() -> None:
        time.sleep(0.02)
        with db_session:
            Note.select().count()
            order.append("waiter got")

    start_ticks = ticks
    gevent.joinall([gevent.spawn(holder, "h1"), gevent.spawn(holder, "h2"), gevent.spawn(waiter)])
    return {"order": order, "ticks": ticks - start_ticks, "peak": db.pool_stats().peak_in_use}


def timeout() -> dict[str, object]:
    """Both connections held 0.6 s; a third waiter gives up after pool_timeout (0.3 s)."""
    result: dict[str, object] = {}

    def holder() -> None:
        with db_session:
            Note.select().count()
            time.sleep(0.6)

    def waiter() -> None:
        time.sleep(0.02)
        started = time.monotonic()
        try:
            with db_session:
                Note.select().count()
            result["error"] = None
        except socketify.db.PoolTimeout as exc:
            result["error"] = exc.status
        result["waited"] = round(time.monotonic() - started, 2)

    start_ticks = ticks
    gevent.joinall([gevent.spawn(holder), gevent.spawn(holder), gevent.spawn(waiter)])
    result["ticks"] = ticks - start_ticks
    return result


def server_side_wait() -> dict[str, object]:
    """PostgreSQL only: two 0.3 s server-side sleeps in two greenlets overlap."""
    if db.dialect != "postgres":
        return {}

    def sleeper() -> None:
        with db_session:
            db.select("SELECT pg_sleep(0.3)")

    start_ticks = ticks
    started = time.monotonic()
    gevent.joinall([gevent.spawn(sleeper), gevent.spawn(sleeper)])
    return {"elapsed": round(time.monotonic() - started, 2), "ticks": ticks - start_ticks}


def kept_watchers() -> dict[str, object]:
    """PostgreSQL only: a pooled connection waits on the same two watchers query after query,
    at the database's priority."""
    if db.dialect != "postgres":
        return {}
    from socketify.drivers import kept_watchers

    with db_session:
        db.select("SELECT 1")
        con = db.get_connection()
        first = kept_watchers(con)
        db.select("SELECT 2")
        again = kept_watchers(con)
    same = first is not None and again is not None and all(map(operator.is_, first, again))
    return {
        "kept": same,
        "priorities": [watcher.priority for watcher in first or ()],
    }


gevent.spawn(ticker)
report = {
    "watchers": kept_watchers(),
    "isolation": session_isolation(),
    "wait": cooperative_wait(),
    "timeout": timeout(),
    "server_side": server_side_wait(),
}
print(json.dumps(report))
