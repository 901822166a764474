"""`run_in_db_session(call)`: Pony's `with db_session: call()`, with a cheap end for reads.

Theory of operation. Pony keeps its per-session state on a thread-local object, which under
gevent is greenlet-local; every attribute read of such an object costs about as much as a dozen
ordinary ones, and Pony's enter and exit read and write it a dozen times. This function works
on the greenlet's own dictionary of that object (fetched once) and does what Pony's default
`db_session` does on entering and leaving. The ending that matters for speed — a session that
only read, on one database, outside any transaction — is Pony's commit-and-release reduced to
what it does there: release the session cache (which gives the connection back to the pool).
Every other ending (writes, an open transaction, several databases, an exception) runs Pony's
own `_commit_or_rollback`, so commits, rollbacks, hooks and error translation are Pony's.

The caller must know no session is open (the middleware checks); a nested session is simply
the caller calling `call()` directly, as Pony's nesting would.

`session_cache(db, state)` is Pony's `db._get_cache()` for the fast readers: the same checks,
but the cache it creates is a `LeanSessionCache`, which makes the eight containers a read
never touches (permission caches, collection statistics, ...) on first use instead of up
front; Pony reaches them by attribute, so it cannot tell the difference.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from pony.orm import core

__all__ = ["LeanSessionCache", "run_in_db_session", "session_cache"]

T = TypeVar("T")

_db_session = core.db_session  # Pony's default session: not immediate, optimistic, no retry


def run_in_db_session(call: Callable[[], T]) -> T:
    """Run `call()` as the outermost `db_session`: commit when it returns, roll back if not."""
    state = core.local.__dict__
    if state["db_session"] is not None or state["db_context_counter"]:
        raise RuntimeError("run_in_db_session() inside a db_session")
    state["db_session"] = _db_session
    state["db_context_counter"] = 1
    try:
        result = call()
    except BaseException:
        state["db_context_counter"] = 0
        _db_session._commit_or_rollback(*sys.exc_info())  # Pony's rollback; clears the session
        raise
    state["db_context_counter"] = 0
    if not _release_read_only(state):
        _db_session._commit_or_rollback(None, None, None)  # Pony's commit and release
    return result


def _release_read_only(state: dict[str, Any]) -> bool:
    """End a session that only read, from at most one database, outside a transaction;
    False (nothing done) when Pony must end it."""
    caches = state["db2cache"]
    if len(caches) > 1:
        return False
    cache = None
    if caches:
        (cache,) = caches.values()
        if cache.modified or cache.in_transaction or cache.objects_to_save:
            return False
    try:
        if cache is not None:
            # What Pony's commit() then release leave to do here: no flush or COMMIT is due,
            # so only the release (the commit's clearing of the cache is discarded with it).
            cache.close(rollback=False)
    finally:
        state["db_session"] = None
        if state["user_groups_cache"]:
            state["user_groups_cache"].clear()
        if state["user_roles_cache"]:
            state["user_roles_cache"].clear()
    return True


def session_cache(db: Any, state: dict[str, Any]) -> Any:
    """Pony's `db._get_cache()`, given the greenlet's dict of Pony's local state."""
    cache = state["db2cache"].get(db)
    if cache is None:
        if not state["db_context_counter"] or db.provider is None:
            return db._get_cache()  # Pony's errors (no db_session, not bound) or its REPL mode
        cache = state["db2cache"][db] = LeanSessionCache(db, state["db_session"])
    return cache


def _nested_defaultdict() -> defaultdict[Any, Any]:
    return defaultdict(dict)


class LeanSessionCache(core.SessionCache):
    """Pony's session cache, whose rarely used containers are made when first touched."""

    _MADE_ON_USE: dict[str, Callable[[], Any]] = {
        "max_id_cache": dict,
        "collection_statistics": dict,
        "for_update": set,
        "modified_collections": lambda: defaultdict(set),
        "query_results": dict,
        "perm_cache": lambda: defaultdict(_nested_defaultdict),
        "user_roles_cache": lambda: defaultdict(dict),
        "obj_labels_cache": dict,
    }

    def __init__(self, database: Any, db_session: Any) -> None:
        # The fields of Pony's SessionCache.__init__, minus those in _MADE_ON_USE.
        self.is_alive = True
        self.num = next(core.num_counter)
        self.database = database
        self.objects: set[Any] = set()
        self.indexes: defaultdict[Any, Any] = defaultdict(dict)
        self.seeds: defaultdict[Any, Any] = defaultdict(set)
        self.noflush_counter = 0
        self.objects_to_save: list[Any] = []
        self.saved_objects: list[Any] = []
        self.dbvals_deduplication_cache: defaultdict[Any, Any] = defaultdict(dict)
        self.modified = False
        self.db_session = db_session
        self.immediate = db_session is not None and db_session.immediate
        self.connection = None
        self.in_transaction = False
        self.saved_fk_state = None

    def __getattr__(self, name: str) -> Any:
        make = LeanSessionCache._MADE_ON_USE.get(name)
        if make is None:
            raise AttributeError(name)
        value = make()
        setattr(self, name, value)
        return value
