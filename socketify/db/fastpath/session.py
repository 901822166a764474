"""The database middleware's `db_session`, entered and ended on the greenlet's Pony state.

Theory of operation. Pony keeps its per-session state on a thread-local object, which under
gevent is greenlet-local; every attribute read of such an object costs about as much as a dozen
ordinary ones, and Pony's enter and exit read and write it a dozen times. These functions work
on the greenlet's own dictionary of that object (`state`, fetched once) and do what Pony's
default `db_session` does on entering and leaving: `enter_session(state)`, then
`end_session(state)` when the work returned or `abort_session(state)` when it raised.
`open_session` and `close_session` are the database middleware's two hooks built on them,
`in_db_session` its `(req, res, next)` form (what `transactional` runs), and
`run_in_db_session(call)` the three steps around a call.

The ending that matters for speed — a session that only read, on one database with the fast
path on, outside any transaction — is Pony's commit-and-release reduced to what it does
there: release the session cache (Pony's `SessionCache.close(rollback=False)`, written out)
and give the connection back to the pool. Every other ending (writes, an open transaction,
several databases, an exception) is Pony's own `db_session.__exit__`, so commits, rollbacks,
hooks and error translation are Pony's.

A session nested in another (middleware plus decorator, or the application's own `with
db_session`) is counted in Pony's nesting counter and leaves the ending to the outermost one,
which maps the error after rolling everything back: answering in the inner one would let the
outer session commit.

The fast readers (`fastpath.loader`) make a session's cache as Pony's `db._get_cache()`
would, but a `LeanSessionCache`: it makes the containers a read never touches (permission
caches, collection statistics, ...) on first use instead of up front, and its fields that start
as constants start as class attributes; Pony reaches them all by attribute, so it cannot tell
the difference.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from pony.orm import core

import socketify.db.green as green
from socketify.db.errors import answer_for, send_answer
from socketify.db.pool import BoundedPool

__all__ = [
    "LeanSessionCache",
    "abort_session",
    "close_session",
    "end_session",
    "enter_session",
    "in_db_session",
    "open_session",
    "run_in_db_session",
]

T = TypeVar("T")

_db_session = core.db_session  # Pony's default session: not immediate, optimistic, no retry
_num_counter = core.num_counter  # numbers Pony's session caches in creation order

# An entity class attribute: whether its objects have collection attributes (see `_detach`).
_HAS_COLLECTIONS = "_socketify_has_collections_"


def open_session(req: Any, res: Any) -> bool:
    """The hooked middleware's `before`: open the session, or count one more nesting level."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()  # gevent patched after Pony was imported: make its state local
    state = core.local.__dict__
    if state["db_session"] is None:
        if state["db_context_counter"]:
            raise RuntimeError("a db_session is being entered or left in this greenlet")
        state["db_session"] = _db_session  # `enter_session`, written out
        state["db_context_counter"] = 1
    else:
        # Nested in another session: Pony's own nesting count, which `close_session` lowers.
        state["db_context_counter"] += 1
    return True


def close_session(req: Any, res: Any, error: BaseException | None) -> bool:
    """The hooked middleware's `after`: end the session (commit, or roll back after `error`);
    True when it answered `error`, or a failed commit, as HTTP."""
    state = core.local.__dict__
    level = state["db_context_counter"] - 1
    if level:
        state["db_context_counter"] = level
        return False  # nested: the outermost session ends it and maps the error
    try:
        if error is None:
            end_session(state)
            return False
        abort_session(state, error)
    except Exception as exc:  # the commit failed: its error is answered, or raised
        answer = answer_for(exc)
        if answer is None:
            raise
        send_answer(res, answer, exc)
        return True
    answer = answer_for(error) if isinstance(error, Exception) else None
    if answer is None:
        return False  # the chain raises the error on
    send_answer(res, answer, error)
    return True


def in_db_session(req: Any, res: Any, next: Callable[[], Any]) -> Any:
    """Run `next()` in a `db_session` and return its result; answer `res` when it fails with
    a mapped database error (the middleware, in its `(req, res, next)` form)."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()
    state = core.local.__dict__
    if state["db_session"] is not None:
        return next()  # nested: the outermost session ends it and maps the error
    if state["db_context_counter"]:
        raise RuntimeError("a db_session is being entered or left in this greenlet")
    state["db_session"] = _db_session  # `enter_session`, written out
    state["db_context_counter"] = 1
    try:
        try:
            result = next()
        except BaseException as exc:
            abort_session(state, exc)
            raise
        end_session(state)
        return result
    except Exception as exc:
        answer = answer_for(exc)
        if answer is None:
            raise
        send_answer(res, answer, exc)
        return None


def run_in_db_session(call: Callable[[], T], state: dict[str, Any] | None = None) -> T:
    """Run `call()` as the outermost `db_session`: commit when it returns, roll back if not.

    `state`: the greenlet's Pony state (`core.local.__dict__`) when the caller has it already.
    """
    if state is None:
        state = core.local.__dict__
    enter_session(state)
    try:
        result = call()
    except BaseException as exc:
        abort_session(state, exc)
        raise
    end_session(state)
    return result


def enter_session(state: dict[str, Any]) -> None:
    """Open Pony's default `db_session` in the greenlet whose Pony state is `state`."""
    if state["db_session"] is not None or state["db_context_counter"]:
        raise RuntimeError("run_in_db_session() inside a db_session")
    state["db_session"] = _db_session
    state["db_context_counter"] = 1


def abort_session(state: dict[str, Any], error: BaseException) -> None:
    """End the session after its work raised `error`: Pony's rollback."""
    _db_session.__exit__(type(error), error, error.__traceback__)


def end_session(state: dict[str, Any]) -> None:
    """End the session after its work returned: commit, or only release after reads."""
    caches = state["db2cache"]
    if not caches:
        state["db_context_counter"] = 0
        _forget_session(state)
        return
    if len(caches) > 1:
        _db_session.__exit__(None, None, None)  # Pony's commit and release
        return
    (cache,) = caches.values()
    if (
        cache.modified
        or cache.in_transaction
        or cache.objects_to_save
        or cache.db_session is not _db_session
        or not getattr(cache.database, "fast_path", False)
    ):
        _db_session.__exit__(None, None, None)
        return
    state["db_context_counter"] = 0
    # What Pony's commit() then release leave to do here: no flush or COMMIT is due, so only
    # the release (the commit's clearing of the cache is discarded with it), which is Pony's
    # `cache.close(rollback=False)` for a cache of our non-strict, non-DDL session, written out
    # here (PERF: no call per step).
    try:
        database = cache.database
        del caches[database]
        cache.is_alive = False
        connection = cache.connection
        if connection is None:
            return  # Pony leaves the objects attached then, and so do we
        cache.connection = None
        try:
            provider = database.provider
            pool = getattr(provider, "pool", None)
            if type(pool) is BoundedPool:
                pool.release(connection)  # what our providers' release does outside DDL
            else:
                provider.release(connection, cache)
        finally:
            for obj in cache.objects:
                obj._dbvals_ = obj._session_cache_ = None
                has_collections = type(obj).__dict__.get(_HAS_COLLECTIONS)
                if has_collections is None:
                    has_collections = _note_collections(type(obj))
                if has_collections:
                    vals = obj._vals_
                    for attr, setdata in list(vals.items()):
                        if attr.is_collection and not setdata.is_fully_loaded:
                            vals[attr] = None
            cache.objects = cache.objects_to_save = cache.saved_objects = None
            cache.query_results = cache.indexes = cache.seeds = cache.for_update = None
            cache.max_id_cache = cache.modified_collections = None
            cache.collection_statistics = cache.dbvals_deduplication_cache = None
    finally:
        state["db_session"] = None
        if state["user_groups_cache"] or state["user_roles_cache"]:
            _forget_users(state)


def _forget_session(state: dict[str, Any]) -> None:
    state["db_session"] = None
    if state["user_groups_cache"] or state["user_roles_cache"]:
        _forget_users(state)


def _forget_users(state: dict[str, Any]) -> None:
    state["user_groups_cache"].clear()
    state["user_roles_cache"].clear()


def _note_collections(cls: Any) -> bool:
    has_collections = any(attr.is_collection for attr in cls._attrs_)
    type.__setattr__(cls, _HAS_COLLECTIONS, has_collections)
    return has_collections


def _nested_defaultdict() -> defaultdict[Any, Any]:
    return defaultdict(dict)


class _MadeOnUse:
    """A session cache field made when first read, then stored on the instance."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, cache: Any, owner: type | None = None) -> Any:
        if cache is None:
            return self
        value = cache.__dict__[self.name] = self.make()
        return value


class LeanSessionCache(core.SessionCache):
    """Pony's session cache, whose rarely used containers are made when first touched.

    PERF: the lazy fields are non-data descriptors on the class, not a `__getattr__`: a class
    with `__getattr__` defeats the interpreter's attribute caches for every field, and the
    session cache's fields are read dozens of times per request (by Pony and by us).
    """

    seeds = _MadeOnUse(lambda: defaultdict(set))
    saved_objects = _MadeOnUse(list)
    max_id_cache = _MadeOnUse(dict)
    collection_statistics = _MadeOnUse(dict)
    for_update = _MadeOnUse(set)
    modified_collections = _MadeOnUse(lambda: defaultdict(set))
    query_results = _MadeOnUse(dict)
    perm_cache = _MadeOnUse(lambda: defaultdict(_nested_defaultdict))
    user_roles_cache = _MadeOnUse(lambda: defaultdict(dict))
    obj_labels_cache = _MadeOnUse(dict)

    _MADE_ON_USE = (
        "seeds",
        "saved_objects",
        "max_id_cache",
        "collection_statistics",
        "for_update",
        "modified_collections",
        "query_results",
        "perm_cache",
        "user_roles_cache",
        "obj_labels_cache",
    )

    # PERF: the fields of Pony's SessionCache.__init__ that start as constants: read from the
    # class until the session sets them (an immutable value is never changed in place).
    is_alive = True
    noflush_counter = 0
    modified = False
    connection = None
    in_transaction = False
    saved_fk_state = None
    _CLASS_DEFAULTS = (
        "is_alive",
        "noflush_counter",
        "modified",
        "connection",
        "in_transaction",
        "saved_fk_state",
    )

    def __init__(self, database: Any, db_session: Any) -> None:
        # The other fields of Pony's SessionCache.__init__, minus those in _MADE_ON_USE.
        self.num = next(_num_counter)
        self.database = database
        self.objects: set[Any] = set()
        self.indexes: defaultdict[Any, Any] = defaultdict(dict)
        self.objects_to_save: list[Any] = []
        self.dbvals_deduplication_cache: defaultdict[Any, Any] = defaultdict(dict)
        self.db_session = db_session
        self.immediate = db_session is not None and db_session.immediate
