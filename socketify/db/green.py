"""Pony under pre-fork and gevent: connections never cross a fork, sessions never cross greenlets.

Theory of operation. A worker monkey-patches gevent *before* it imports the app, so Pony,
imported afterwards, builds its thread-local state on gevent's greenlet-local class and every
request greenlet has its own `db_session`. Two paths import Pony before patching: `socketify
run --preload` (the master imports the app, then forks workers that patch) and `workers=0`
(the script imports the app, then `listen()` patches). There Pony's state would be one
thread-local shared by every greenlet of the worker — concurrent requests would share a
session. `adopt_gevent()` repairs that: it rebuilds Pony's thread-local objects on the patched
`threading.local`, renews the SQLite writer locks and installs psycopg2's wait callback. It
runs from gevent's "did patch all" event (gevent.events, through zope.event) and, as a safety
net, from the database middleware. This repair replaces module-level objects of Pony (`local`
in `pony.orm.core` and `pony.orm.sqltranslation`, SQLite's `local_exceptions`) whatever the
fast path's setting: without it a preloaded app would be wrong, not slow.

Fork: `os.register_at_fork(before=...)` closes the idle pooled connections of every database
in the process that is about to fork (the master, with --preload), so no connection is ever
inherited; the pool itself rebuilds its per-process state when it sees a new pid.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import weakref
from typing import Any

__all__ = ["adopt_gevent", "rebased", "track"]

log = logging.getLogger("socketify.db")

_databases: weakref.WeakSet[Any] = weakref.WeakSet()
_hooks_installed = False
# The `threading.local` class Pony's state was last checked against; `None` before any check.
# Read by the database middleware: while it is `threading.local`, there is nothing to adopt.
adopted_local: type | None = None


def track(db: Any) -> None:
    """Register a socketify Database (whose `use_local_class` moves its own per-thread state)
    for fork and gevent handling (installs hooks once)."""
    global _hooks_installed
    _databases.add(db)
    if _hooks_installed:
        return
    _hooks_installed = True
    os.register_at_fork(before=_close_idle_connections)
    try:
        import zope.event  # gevent's event bus; present wherever gevent is
    except ImportError:
        return
    zope.event.subscribers.append(_on_gevent_event)


def _close_idle_connections() -> None:
    for db in list(_databases):
        if db.provider is not None:
            db.close_idle_connections()


def _on_gevent_event(event: object) -> None:
    if type(event).__name__ == "GeventDidPatchAllEvent":
        adopt_gevent()


def adopt_gevent() -> bool:
    """Make Pony's per-thread state greenlet-local if gevent patched `threading` after Pony
    was imported; True when something was rebuilt. Cheap when there is nothing to do."""
    global adopted_local
    local_cls = threading.local
    if adopted_local is local_cls:
        return False
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("threading"):
        return False
    core = sys.modules.get("pony.orm.core")
    if core is None or isinstance(core.local, local_cls):
        adopted_local = local_cls  # Pony was imported after patching: already right
        return False
    if core.local.db_context_counter:
        return False  # inside a db_session: rebuilding now would lose it; retry later
    _rebuild_pony_locals(core, local_cls)
    for db in list(_databases):
        db.use_local_class(local_cls)
        adopt = getattr(db.provider, "adopt_gevent", None)
        if adopt is not None:
            adopt()  # SQLite: writer locks on gevent; PostgreSQL: psycopg2's wait callback
    adopted_local = local_cls
    log.debug("Pony state rebuilt on gevent's greenlet-local storage (pid %d)", os.getpid())
    return True


def _rebuild_pony_locals(core: Any, local_cls: type) -> None:
    core.local = rebased(core.local, local_cls)
    translation: Any = sys.modules.get("pony.orm.sqltranslation")
    if translation is not None:
        translation.local = rebased(translation.local, local_cls)
    sqlite: Any = sys.modules.get("pony.orm.dbproviders.sqlite")
    if sqlite is not None:
        sqlite.local_exceptions = rebased(sqlite.local_exceptions, local_cls)
        sqlite.SQLiteProvider.local_exceptions = sqlite.local_exceptions


def rebased(obj: Any, local_cls: type) -> Any:
    """A fresh instance of `type(obj)`'s behaviour on `local_cls` storage."""
    cls = type(obj)
    if isinstance(obj, local_cls):
        return obj
    namespace = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    return type(cls.__name__, (local_cls,), namespace)()
