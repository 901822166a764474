"""Database and cache drivers that wait cooperatively in a gevent worker.

Monkey-patching reaches drivers written over Python's `socket` (PyMySQL, redis-py), but not
the ones that talk to their server from C. Every worker makes those cooperative as it boots,
before the app is imported, so a query parks only its request's greenlet however the app
reaches the driver (directly, through SQLAlchemy, through Django's ORM):

- psycopg2: a wait callback for every connection of the process (what psycogreen does), on
  watchers each connection keeps, woken ahead of the worker's other work;
- psycopg 3: its select-based wait, which monkey-patching makes cooperative;
- mysqlclient (MySQLdb) cannot be made cooperative: a worker that imported it says so, once.

`SOCKETIFY_COOPERATIVE_DRIVERS=0` in the environment turns all of this off.
"""

from socketify.drivers.cooperative import COOPERATIVE_ENV, make_cooperative, warn_blocking
from socketify.drivers.psycopg2_wait import cooperate_with_gevent, kept_watchers

__all__ = [
    "COOPERATIVE_ENV",
    "cooperate_with_gevent",
    "kept_watchers",
    "make_cooperative",
    "warn_blocking",
]
