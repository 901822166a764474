"""Pipelined reads (psycopg 3) under gevent: print what two concurrent greenlets observed.

python gevent_pipeline.py URL
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from pony.orm import db_session  # noqa: E402

import socketify.db  # noqa: E402

db = socketify.db.connect(sys.argv[1], pool_size=2)
db.generate_mapping(create_tables=True)
sleepy = db.statement("SELECT $2::int FROM pg_sleep($1)")
ticks = 0


def tick() -> None:
    global ticks
    while True:
        gevent.sleep(0.005)
        ticks += 1


def read(n: int) -> list[object]:
    with db_session:
        return sleepy.one_each([(0.15, n), (0.15, n + 1)])


with db_session:
    sleepy.one_each([(0, 0)])  # connect first: the timing below is the reads alone
ticker = gevent.spawn(tick)
started = time.monotonic()
results = [g.get() for g in [gevent.spawn(read, 1), gevent.spawn(read, 10)]]
elapsed = time.monotonic() - started
ticker.kill()
reads = db.pipeline_reads()
print(
    json.dumps(
        {
            "results": results,
            "elapsed": elapsed,
            "ticks": ticks,
            "pipeline_opened": None if reads is None else reads.pool.stats().opened,
        }
    )
)
