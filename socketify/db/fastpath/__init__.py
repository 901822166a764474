"""The fast path: everything in socketify.db that works inside Pony, behind one switch.

    db = socketify.db.connect(url)                      # on, on a verified Pony release
    db = socketify.db.connect(url, fast_path=False)     # this database: plain Pony
    SOCKETIFY_DB_FAST_PATH=0 socketify run app:server   # every database: plain Pony

Theory of operation. Pony spends most of a primary-key read in generic code: about 240 Python
calls for `User[1]`, two methods per attribute read, a dozen greenlet-local reads and writes to
enter and leave a `db_session`. The modules of this package do the same work with what they
worked out once, reading and writing Pony's own data structures (the session cache, the
objects' slots, the SQL cache, the per-greenlet session state):

* `loader`: `Entity[pk]` through a loader compiled per entity, with the query statistics Pony
  keeps (`querystats`), only the converter steps that change a value (`converters`) and, on
  PostgreSQL, a statement prepared once per connection (`pg_prepared`);
* `attributes`: a loaded attribute value read in one call;
* `session`: the middleware's `db_session` entered and left on the greenlet's Pony state, and a
  read-only session ended without Pony's commit machinery;
* `rows`: `socketify.db.get_row` read without making an entity object;
* `providers`: the provider calls of every query without Pony's exception-translating
  decorator, and a read-only session's transaction mode set without a trip through it.

Each is taken per database (`connect(..., fast_path=...)`, read as `db.fast_path`): off, its
entities, attributes and provider are Pony's own, `get_row` is `Entity[pk].to_dict()`, and its
middleware opens Pony's `db_session` through its public context manager. Everything else of
socketify.db — the bounded pool, the per-request session and its 404/409/422/503 answers,
migrations, documents, the gevent-friendly drivers — works the same either way. Nothing outside
this package imports a private name of Pony, and no module of it is imported while every
database has the fast path off, so a Pony release that changed what these modules rely on
cannot even break an import there.

The switch. The fast path is on for a database unless `fast_path=False` is passed to `connect`,
or `SOCKETIFY_DB_FAST_PATH` is `0` (also `off`, `false`, `no`), and then only on a Pony release
in `VERIFIED_PONY`, the releases tests/db has passed against with it on and off. On any other
release it refuses itself: one warning is logged and the database is plain Pony, so upgrading
Pony cannot break an application silently. `SOCKETIFY_DB_FAST_PATH=force` takes it on an
unverified release too: that is how a new Pony release is tried (run tests/db with it, and
widen `VERIFIED_PONY` when they pass).
"""

from __future__ import annotations

import functools
import logging
import os
import re

import pony

__all__ = ["ENV", "VERIFIED_PONY", "installed_pony", "refusal", "resolve"]

log = logging.getLogger("socketify.db")

ENV = "SOCKETIFY_DB_FAST_PATH"
# The Pony releases, first and last inclusive, that tests/db has passed against both ways.
VERIFIED_PONY = ((0, 7, 19), (0, 7, 20))

_OFF = frozenset({"0", "off", "false", "no"})
_ON = frozenset({"", "1", "on", "true", "yes"})
_FORCE = "force"


def installed_pony() -> tuple[int, ...]:
    """The installed Pony's release as numbers: "0.7.20" -> (0, 7, 20); "0.8.0rc1" -> (0, 8, 0)."""
    numbers = re.match(r"\d+(?:\.\d+)*", pony.__version__)
    return tuple(int(part) for part in numbers.group().split(".")) if numbers else ()


def refusal() -> str | None:
    """Why the fast path refuses the installed Pony, or None when it was verified against it."""
    first, last = VERIFIED_PONY
    if first <= installed_pony() <= last:
        return None
    verified = f"{'.'.join(map(str, first))} to {'.'.join(map(str, last))}"
    return f"Pony {pony.__version__} is not a release it was verified against ({verified})"


def resolve(requested: bool = True) -> bool:
    """Whether a database that asks for the fast path (`requested`) gets it, given
    `SOCKETIFY_DB_FAST_PATH` and the installed Pony (a refusal is logged once per process)."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting not in _ON and setting not in _OFF and setting != _FORCE:
        raise ValueError(f"{ENV}={os.environ[ENV]!r}: use 1 (the default), 0, or force")
    if not requested or setting in _OFF:
        return False
    reason = refusal()
    if reason is not None and setting != _FORCE:
        _warn_once(reason)
        return False
    return True


@functools.cache
def _warn_once(reason: str) -> None:
    log.warning(
        "socketify.db fast path off: %s; using plain Pony (%s=force to use it anyway)",
        reason,
        ENV,
    )
