"""`Entity[pk]` in a few calls: Pony's primary-key read, compiled per entity.

Theory of operation. Pony answers `User[1]` generically: it validates the key, probes the
session's identity map, builds (or finds in its cache) the SELECT, runs it through its
connection handling, then parses the row attribute by attribute, creates the object in the
identity map and stores the values, about 240 Python calls in all. A database with the fast
path on gives its entities the metaclass `FastEntityMeta` (`entity_base`), whose `__getitem__`
hands a single-value key to a `PkLoader` compiled for the entity the first time it is used
after `generate_mapping`.

The loader does the same steps with what it worked out once: the SQL (taken from Pony's own
cache, so the statement is the one Pony would send), which row offset feeds which attribute,
and which converter steps are not the identity. It keeps Pony's data structures exactly as
Pony leaves them — the object is registered in the session cache's identity map (a later
`User[1]` in the session returns it), its read bits are set for the optimistic check, unique
and composite key indexes are updated, foreign keys become Pony's unloaded "seed" objects, JSON
values are wrapped for change tracking, lazy attributes stay unloaded, and the query is
counted in `db.local_stats` and `db.last_sql` — and it runs Pony's own code for anything that
is not the common case. Pony handles the call itself when:

* the entity is not eligible (see `ineligibility`): composite or foreign-key primary key,
  inheritance, a primary key with `py_check`, or attributes Pony stores in several columns;
* the key is not a plain value of the primary key's kind (a tuple, say), or fails validation;
* the object is already in the identity map (Pony's cache checks apply: deleted, seeds);
* the session has unflushed changes, must start a transaction first, is in SQL debug mode or
  inside a prefetch context.

A missing row raises `ObjectNotFound`, as Pony does.

This leans on Pony's internals (the session cache's fields, the object's slots, the SQL cache,
the per-greenlet session state); tests/db/test_db_fastload.py compares what it builds with
what Pony's own path builds, field by field, for the releases in `VERIFIED_PONY`, and on any
other release the switch (socketify.db.fastpath) leaves it off.
"""

from __future__ import annotations

from time import time
from typing import Any

from pony.orm import core
from pony.orm.core import EntityMeta, MultipleObjectsFoundError, ObjectNotFound
from pony.utils import throw

from socketify.db.fastpath.converters import overrides, sql2py_of
from socketify.db.fastpath.providers import FastPooled, raise_translated
from socketify.db.fastpath.querystats import count_query
from socketify.db.fastpath.session import LeanSessionCache

__all__ = [
    "FastEntityMeta",
    "PkLoader",
    "entity_base",
    "ineligibility",
    "loader_for",
    "plain_execute",
]

_LOADER = "_socketify_pk_loader_"
# Marks an entity Pony must handle; a class attribute like the loader itself.
_PONY = False
_INT_KEY = object()


class FastEntityMeta(EntityMeta):
    """Pony's entity metaclass; `Entity[key]` takes the compiled loader when it can."""

    def __getitem__(cls, key: Any) -> Any:
        loader = cls.__dict__.get(_LOADER)
        if loader is None:
            loader = _install(cls)
        if loader is _PONY or type(key) is tuple:
            return EntityMeta.__getitem__(cls, key)
        return loader.load(key)


# Pony recognises entity classes by their metaclass's name in places (its query translator
# and type normaliser compare `type(entity).__name__` with "EntityMeta").
FastEntityMeta.__name__ = FastEntityMeta.__qualname__ = "EntityMeta"


def entity_base(db: Any) -> Any:
    """Pony's `db.Entity` base on `FastEntityMeta`: the entities declared on it inherit it."""
    entity = type.__new__(FastEntityMeta, "Entity", (core.Entity,), {})
    entity._database_ = db  # what Pony's Database.__init__ sets on its own base
    return entity


def loader_for(entity: Any) -> PkLoader | None:
    """The compiled loader of `entity`, or None when Pony's generic path serves it."""
    loader = entity.__dict__.get(_LOADER)
    if loader is None:
        loader = _install(entity) if isinstance(entity, FastEntityMeta) else _PONY
    return None if loader is _PONY else loader


def _install(cls: Any) -> Any:
    if cls._database_.schema is None or core.local.prefetch_context_stack:
        # Not mapped yet (Pony raises its own error), or Pony's SQL for the entity would be
        # built with a prefetch context's extra columns: decide on a later call.
        return _PONY
    reason = ineligibility(cls)
    loader = PkLoader(cls) if reason is None else _PONY
    type.__setattr__(cls, _LOADER, loader)
    return loader


def ineligibility(cls: Any) -> str | None:
    """Why `cls[pk]` must take Pony's generic path, or None when the loader applies."""
    if cls._pk_is_composite_:
        return "composite primary key"
    pk = cls._pk_attrs_[0]
    if pk.reverse or pk.column is None:
        return "the primary key is a relation"
    if pk.py_check is not None:
        return "the primary key has py_check"
    if len(pk.converters) != 1:
        return "the primary key has no single converter"
    if cls._discriminator_attr_ is not None or cls._subclasses_ or cls._root_ is not cls:
        return "inheritance"
    for attr in cls._attrs_:
        if attr.is_collection or not attr.columns:
            continue
        if len(attr.columns) != 1 and not attr.reverse:
            return f"{attr.name} has several columns"
        if not attr.reverse and len(attr.converters) != 1:
            return f"{attr.name} has no single converter"
    return None


class PkLoader:
    """Loads one entity by primary key inside a `db_session`, as `Entity[pk]` would."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.db = cls._database_
        self.pk = pk = cls._pk_attrs_[0]
        self.pk_attrs = cls._pk_attrs_
        converter = pk.converters[0]
        # `int` keys need no validation beyond the converter's range: Pony's check, inlined.
        self.int_range = (
            (converter.min_val, converter.max_val)
            if pk.py_type is int and hasattr(converter, "min_val")
            else None
        )
        self.int_keys = self.int_range is not None
        low, high = self.int_range or (None, None)
        self.low = float("-inf") if low is None else low
        self.high = float("inf") if high is None else high
        provider = self.db.provider
        self.reads_in_autocommit = getattr(provider, "session_reads_in_autocommit", False)
        # PostgreSQL: connections of this type keep a cursor for these reads (pg_green).
        self.key_read_cursor_type = getattr(provider, "key_read_cursor_type", None)
        # The fast providers' `prepare_read`, unless it is the base one that does nothing.
        prepare_read = getattr(type(provider), "prepare_read", None)
        self.prepare_read = (
            None
            if prepare_read is None or prepare_read is FastPooled.prepare_read
            else provider.prepare_read
        )
        self.sql, self.adapter, attr_offsets = cls._construct_sql_(
            {pk: False}, False, None, False, False, False
        )
        self.arguments = _argument_shape(self.adapter, pk, converter)
        # PostgreSQL: the statement prepared on each connection (see pg_prepared), else None.
        prepared_select = getattr(self.db.provider, "prepared_select", None)
        self.prepared = (
            None if prepared_select is None else prepared_select(self.sql, self.arguments)
        )
        self.pk_offset = attr_offsets[pk][0]
        self.pk_sql2py = sql2py_of(converter)
        # (attr, offsets, sql2py or None, dbval2val or None, is_reverse), in Pony's order.
        self.columns: list[tuple[Any, Any, Any, Any, bool]] = []
        for attr in cls._attrs_:
            offsets = attr_offsets.get(attr)
            if offsets is None or attr is pk:
                continue  # lazy attributes stay unloaded, collections have no column
            if attr.reverse:
                self.columns.append((attr, offsets, None, None, True))
                continue
            conv = attr.converters[0]
            self.columns.append(
                (
                    attr,
                    offsets[0],
                    sql2py_of(conv),
                    conv if overrides(conv, "dbval2val") else None,
                    False,
                )
            )
        loaded = {column[0] for column in self.columns}
        self.unique = [column[0] for column in self.columns if column[0].is_unique]
        self.composite = [
            attrs for attrs in cls._composite_keys_ if any(a in loaded for a in attrs)
        ]
        self.has_reverse = any(column[4] for column in self.columns)
        self.attr_offsets = attr_offsets
        self.rbits = cls._bits_except_volatile_.get(pk, 0)
        # (attr, offset, sql2py or None) when every column is a plain value: no relation, no
        # converter step after the driver's, no key index to update; else None (`_build`).
        plain = not self.has_reverse and not self.unique and not self.composite
        plain = plain and all(column[3] is None for column in self.columns)
        self.plain_columns = (
            tuple((attr, offset, sql2py) for attr, offset, sql2py, _, _ in self.columns)
            if plain
            else None
        )

    def load(self, key: Any) -> Any:
        """`cls[key]`; Pony's own path whenever this one would not be exactly Pony's."""
        if type(key) is int and self.int_keys and self.low <= key <= self.high:
            pkval = key  # Pony's validation of an int key, inlined
        else:
            pkval = self.pkval(key)
            if pkval is None:
                return EntityMeta.__getitem__(self.cls, key)
        # One greenlet-local lookup for Pony's state instead of one per access.
        fetched = self.fetch(pkval, core.local.__dict__)
        if fetched is None:
            return EntityMeta.__getitem__(self.cls, key)
        if self.plain_columns is not None:
            return self._build_plain(fetched[0], fetched[1], key)
        return self._build(fetched[0], fetched[1], key)

    def pkval(self, key: Any) -> Any:
        """The validated primary key for `key`; None when Pony must handle the key."""
        if type(key) is int and self.int_keys:
            return key if self.low <= key <= self.high else None  # else: Pony raises its error
        try:
            return self.pk.validate(key, None, self.cls, from_db=False)
        except (TypeError, ValueError):
            return None

    def fetch(self, pkval: Any, state: dict[str, Any]) -> tuple[Any, Any] | None:
        """Select the row of `pkval` in the session whose Pony state is `state`:
        `(session cache, row)`, or None when Pony must do it.

        Pony's `_find_in_db_` for one key: its `_exec_sql` (connection, statement, statistics)
        and `_fetch_objects` for one row, written out."""
        db = self.db
        caches = state["db2cache"]
        cache = caches.get(db)
        if cache is None:
            if (
                not state["db_context_counter"]
                or db.provider is None
                or state["debug"]
                or state["prefetch_context_stack"]
            ):
                return None  # Pony's errors (no db_session, not bound), REPL mode, or its path
            # Pony's `db._get_cache()`, with our lean cache (fastpath.session). PERF: a new
            # cache has no changes, no identity map entry and no connection to check.
            cache = caches[db] = LeanSessionCache(db, state["db_session"])
            connection = self._connect(db, cache)
        else:
            if (
                cache.modified
                or cache.db_session is not state["db_session"]
                or state["debug"]
                or state["prefetch_context_stack"]
            ):
                return None
            indexes = cache.indexes
            pk_attrs = self.pk_attrs
            if pk_attrs in indexes and pkval in indexes[pk_attrs]:
                return None  # in the identity map: Pony's cache checks apply
            connection = cache.connection
            if connection is None:
                connection = self._connect(db, cache)
            elif cache.immediate and not cache.in_transaction:
                return None  # Pony sets the transaction mode first
        sql = self.sql
        if type(connection) is self.key_read_cursor_type:
            cursor = connection.key_read_cursor
            if cursor is None:
                cursor = connection.key_read_cursor = connection.cursor()
        else:
            cursor = connection.cursor()
        started = time()
        prepared = self.prepared
        try:
            # PERF: the driver's execute, not the provider's: no statement here calls a Python
            # SQL function, so only a failure needs Pony's translation (`_retry_select`). The
            # parameters are laid out only for the text statement, not the prepared one.
            if (
                prepared is None
                or cache.in_transaction
                or not prepared.run(connection, cursor, pkval)
            ):
                cursor.execute(
                    sql, (pkval,) if self.arguments is _INT_KEY else self.arguments_for(pkval)
                )
        except Exception as error:
            cursor, started = self._retry_select(cache, error, self.arguments_for(pkval))
        if cache.immediate:
            cache.in_transaction = True
        count_query(db, sql, started)
        rows = cursor.fetchmany(2)
        if len(rows) != 1:
            if rows:
                throw(
                    MultipleObjectsFoundError,
                    "Multiple objects were found. "
                    f"Use {self.cls.__name__}.select(...) to retrieve them",
                )
            throw(ObjectNotFound, self.cls, pkval)
        return cache, rows[0]

    def _connect(self, db: Any, cache: Any) -> Any:
        """Pony's `SessionCache.connect`; for a session that reads in autocommit mode, our
        provider's `prepare_read` sets the mode (Pony's `set_transaction_mode` would find
        nothing more to do than that, and a log line in debug mode, which Pony handles)."""
        session = cache.db_session
        if (
            cache.in_transaction
            or cache.immediate
            or not self.reads_in_autocommit
            or (session is not None and (session.serializable or session.ddl))
        ):
            return cache.connect()
        provider = db.provider
        # PERF: the pool's own connect, not the provider's wrapper around it, and no call to a
        # `prepare_read` with nothing to do (SQLite's): two Python calls less per session.
        connection, is_new = provider.pool.connect()
        if is_new:
            provider.welcome(connection)  # `@db.on_connect` hooks
        prepare_read = self.prepare_read
        if prepare_read is not None:
            try:
                prepare_read(connection)
            except BaseException:
                provider.drop(connection, cache)
                raise
        cache.connection = connection
        return connection

    def _retry_select(self, cache: Any, error: Exception, arguments: Any) -> tuple[Any, float]:
        """After a failed SELECT: Pony's translated error, or its reconnect and one retry."""
        db = self.db
        try:
            raise_translated(db.provider, error)
        except Exception as exc:
            connection = cache.reconnect(exc)  # re-raises unless Pony would reconnect
        cursor = connection.cursor()
        started = time()
        plain_execute(db.provider)(cursor, self.sql, arguments)
        return cursor, started

    def arguments_for(self, pkval: Any) -> Any:
        """The statement's parameters for `pkval`, laid out as Pony's adapter would."""
        shape = self.arguments
        if shape is _INT_KEY:
            return (pkval,)
        if shape is None:
            return self.adapter({self.pk: pkval})
        return {shape: pkval}

    def _build_plain(self, cache: Any, row: Any, key: Any) -> Any:
        """`_build` for an entity whose loaded columns are all plain values."""
        dedup = cache.dbvals_deduplication_cache
        pkval = row[self.pk_offset]
        if self.pk_sql2py is not None:
            pkval = self.pk_sql2py(pkval)
        try:  # Pony's `deduplicate`, inlined: equal values share one object
            pkval = dedup[type(pkval)].setdefault(pkval, pkval)
        except Exception:  # unhashable
            pass
        cache_index = cache.indexes[self.pk_attrs]
        if pkval in cache_index:
            return self._build(cache, row, key)  # the merge with a loaded object
        dbvals: dict[Any, Any] = {}
        for attr, offset, sql2py in self.plain_columns:  # type: ignore[union-attr]
            value = row[offset]
            if value is not None:
                if sql2py is not None:
                    value = sql2py(value)
                try:
                    value = dedup[type(value)].setdefault(value, value)
                except Exception:  # unhashable
                    pass
            dbvals[attr] = value
        # `_new_loaded`, written out (PERF: one call less)
        obj = object.__new__(self.cls)
        cache.objects.add(obj)
        obj._pkval_ = pkval
        obj._status_ = "loaded"
        obj._save_pos_ = None
        obj._session_cache_ = cache
        cache_index[pkval] = obj
        obj._newid_ = None
        obj._wbits_ = 0
        obj._rbits_ = self.rbits
        obj._dbvals_ = dbvals
        vals = obj._vals_ = {self.pk: pkval}
        vals.update(dbvals)
        return obj

    def _new_loaded(self, cache: Any, cache_index: dict[Any, Any], pkval: Any) -> Any:
        """A new object of the entity in the session's identity map, as Pony makes one for
        a row it loads (`_new_` and the bookkeeping of `_get_from_identity_map_`)."""
        obj = object.__new__(self.cls)
        cache.objects.add(obj)
        obj._pkval_ = pkval
        obj._status_ = "loaded"
        obj._save_pos_ = None
        obj._session_cache_ = cache
        cache_index[pkval] = obj
        obj._newid_ = None
        obj._wbits_ = 0
        obj._rbits_ = self.rbits
        return obj

    def _build(self, cache: Any, row: Any, key: Any) -> Any:
        """Pony's `_parse_row_`, `_get_from_identity_map_`, `_db_set_` and `_set_rbits`."""
        cls = self.cls
        dedup = cache.dbvals_deduplication_cache
        pkval = row[self.pk_offset]
        if self.pk_sql2py is not None:
            pkval = self.pk_sql2py(pkval)
        pkval = _deduplicate(pkval, dedup)
        dbvals: dict[Any, Any] = {}
        for attr, offset, sql2py, _, is_reverse in self.columns:
            if is_reverse:
                dbvals[attr] = attr.parse_value(row, offset, dedup)  # a seed of the target
                continue
            value = row[offset]
            if value is not None:
                if sql2py is not None:
                    value = sql2py(value)
                try:  # Pony's `deduplicate`, inlined: equal values share one object
                    value = dedup[type(value)].setdefault(value, value)
                except Exception:  # unhashable
                    pass
            dbvals[attr] = value
        cache_index = cache.indexes[self.pk_attrs]
        if pkval in cache_index:
            # The row's key differs from the one asked for (a case-insensitive collation) and
            # that object is loaded already: Pony's merge, which checks for changed values.
            obj = cls._get_from_identity_map_(pkval, "loaded")
            obj._db_set_(dbvals)
            cls._set_rbits((obj,), {self.pk: key})
            return obj
        obj = self._new_loaded(cache, cache_index, pkval)
        vals = {self.pk: pkval}
        obj._vals_ = vals
        if self.has_reverse:
            obj._dbvals_ = {}
            for attr, dbval in dbvals.items():
                if attr.reverse:
                    attr.db_update_reverse(obj, core.NOT_LOADED, dbval)
                obj._dbvals_[attr] = dbval
        else:
            obj._dbvals_ = dbvals
        new_vals = dbvals
        for attr, _, _, converter, _ in self.columns:
            if converter is not None:
                if new_vals is dbvals:
                    new_vals = dict(dbvals)
                new_vals[attr] = converter.dbval2val(dbvals[attr], obj)
        for attr in self.unique:
            new_val = new_vals[attr]
            if new_val is not None:
                cache.db_update_simple_index(obj, attr, None, new_val)
        for attrs in self.composite:
            prev = tuple(vals.get(a) for a in attrs)
            new = tuple(new_vals[a] if a in new_vals else vals.get(a) for a in attrs)
            if prev != new:
                cache.db_update_composite_index(obj, attrs, prev, new)
        vals.update(new_vals)
        return obj


def _deduplicate(value: Any, dedup: Any) -> Any:
    """Pony's `deduplicate`: equal values loaded in one session share one object."""
    try:
        return dedup[type(value)].setdefault(value, value)
    except Exception:  # unhashable
        return value


def _argument_shape(adapter: Any, pk: Any, converter: Any) -> Any:
    """How Pony's adapter lays the key out: `_INT_KEY` for `(key,)`, a name for `{name: key}`,
    None when the converter changes the value (then the adapter runs every time)."""
    if overrides(converter, "py2sql") or overrides(converter, "val2dbval"):
        return None
    probe = object()
    laid_out = adapter({pk: probe})
    if type(laid_out) is tuple and len(laid_out) == 1 and laid_out[0] is probe:
        return _INT_KEY
    if type(laid_out) is dict and len(laid_out) == 1:
        ((name, value),) = laid_out.items()
        if value is probe:
            return name
    return None


def plain_execute(provider: Any) -> Any:
    """`provider.execute` for a statement that calls no Python SQL function: our providers'
    version without SQLite's traceback bookkeeping (two greenlet-local writes)."""
    return getattr(provider, "execute_plain", provider.execute)
