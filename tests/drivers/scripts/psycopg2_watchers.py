"""Run psycopg2 queries in a gevent-patched process and print, as JSON, what the waits used.

    python psycopg2_watchers.py DSN

Each check says what it saw; the test reads the verdicts.
"""

from __future__ import annotations

import json
import operator
import socket
import sys
import time

from gevent import monkey

monkey.patch_all()

import gevent  # noqa: E402
import psycopg2  # noqa: E402

from socketify.drivers import cooperate_with_gevent, kept_watchers  # noqa: E402

DSN = sys.argv[1]
blocking_sleep = monkey.get_original("time", "sleep")


def same(a: tuple[object, ...] | None, b: tuple[object, ...] | None) -> bool:
    return a is not None and b is not None and all(map(operator.is_, a, b))


def kept_between_queries() -> dict[str, object]:
    """One connection waits on the same two watchers query after query."""
    con = psycopg2.connect(DSN)
    with con.cursor() as cursor:
        cursor.execute("SELECT 1")
        first = kept_watchers(con)
        cursor.execute("SELECT 2")
        again = kept_watchers(con)
    con.close()
    return {"kept": same(first, again), "before_any_wait": kept_watchers_of_fresh()}


def kept_watchers_of_fresh() -> bool:
    """A connection made with the callback off has none until its first wait."""
    import psycopg2.extensions as extensions

    callback = extensions.get_wait_callback()
    extensions.set_wait_callback(None)
    try:
        con = psycopg2.connect(DSN)
    finally:
        extensions.set_wait_callback(callback)
    none_yet = kept_watchers(con) is None
    con.close()
    return none_yet


def descriptor_reused() -> dict[str, object]:
    """A new connection given a closed one's descriptor waits on watchers of its own."""
    old = psycopg2.connect(DSN)
    old.cursor().execute("SELECT 1")
    fd, old_watchers = old.fileno(), kept_watchers(old)
    old.close()
    new = psycopg2.connect(DSN)
    new.cursor().execute("SELECT 1")
    result = {
        "same_descriptor": new.fileno() == fd,
        "own_watchers": not same(old_watchers, kept_watchers(new)),
    }
    new.close()
    return result


def answer_resumes_first() -> dict[str, object]:
    """A database answer and five other sockets become readable in the same turn of the
    loop, the answer first: the query's greenlet resumes before the five."""
    con = psycopg2.connect(DSN)
    resumed: list[str] = []
    pairs = [socket.socketpair() for _ in range(5)]

    def query() -> None:
        con.cursor().execute("SELECT pg_sleep(0.1)")
        resumed.append("query")

    def reader(index: int) -> None:
        pairs[index][0].recv(1)
        resumed.append(f"socket {index}")

    greenlets = [gevent.spawn(query)] + [gevent.spawn(reader, i) for i in range(5)]
    gevent.sleep(0.02)  # every greenlet is parked: the query sent, the readers waiting
    blocking_sleep(0.3)  # the hub is busy; the server answers meanwhile
    for _, writer in pairs:
        writer.send(b"x")  # readable after the answer, in the same turn
    gevent.joinall(greenlets, timeout=5)
    con.close()
    return {"order": resumed}


def overlap() -> float:
    """Three 0.3 s server-side sleeps on three connections, in three greenlets."""

    def sleeper() -> None:
        con = psycopg2.connect(DSN)
        con.cursor().execute("SELECT pg_sleep(0.3)")
        con.close()

    started = time.monotonic()
    gevent.joinall([gevent.spawn(sleeper) for _ in range(3)])
    return round(time.monotonic() - started, 2)


assert cooperate_with_gevent()
report = {
    "loop": type(gevent.get_hub().loop).__module__,
    "kept": kept_between_queries(),
    "reused": descriptor_reused(),
    "priority": answer_resumes_first(),
    "overlap": overlap(),
}
print(json.dumps(report))
