"""Bind and use a database, fork, use it in both processes; print what each saw, as JSON.

    python fork_pool.py URL

Shows the pre-fork contract: the parent's idle connections are closed before fork (so no
connection crosses it), the child opens its own, and the parent keeps working afterwards.
"""

from __future__ import annotations

import json
import os
import sys

from pony.orm import Required, db_session

import socketify.db

db = socketify.db.connect(sys.argv[1], pool_size=4)


class Item(db.Entity):
    name = Required(str)


db.generate_mapping(create_tables=True)


def backend() -> object:
    with db_session:
        Item(name=str(os.getpid()))
        return db.select("SELECT pg_backend_pid()")[0] if db.dialect == "postgres" else 0


report: dict[str, object] = {"parent_before": backend(), "idle_before_fork": db.pool_stats().idle}
reader, writer = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(reader)
    child = {"opened_at_start": db.pool_stats().opened, "backend": backend()}
    os.write(writer, json.dumps(child).encode())
    os._exit(0)
os.close(writer)
os.waitpid(pid, 0)
report["child"] = json.loads(os.read(reader, 4096))
report["idle_after_fork"] = db.pool_stats().idle
report["parent_after"] = backend()
with db_session:
    report["items"] = Item.select().count()
print(json.dumps(report))
