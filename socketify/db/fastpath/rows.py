"""`socketify.db.get_row(Entity, pk)` with the fast path on: the row read without an object.

Theory of operation. The answer is what `Entity[pk].to_dict()` returns (see socketify.db.rows),
read with the entity's compiled primary-key SELECT (see `fastpath.loader`). No entity object,
identity map entry or session cache is made.

Where the statement runs follows Pony's rules for the session it is in:

* the session has not used this database yet (the common case in a request that only reads)
  and starts no transaction (not `immediate`, not `serializable`): a connection is taken from
  the pool for this one statement, read in autocommit mode exactly as Pony would read at the
  start of such a session, and given back at once — so a request made of reads holds a pooled
  connection only while each statement runs. Such statements do not appear in
  `db.local_stats`;
* the session already has the database's cache: on the session's own connection, through the
  compiled loader (inside the session's transaction if one is open);
* the object is loaded in the session already (perhaps changed), or the session has unflushed
  changes, or the entity is one Pony must load itself: that object's `to_dict()`, through
  Pony.
"""

from __future__ import annotations

from typing import Any

from pony.orm import core
from pony.orm.core import MultipleObjectsFoundError, ObjectNotFound
from pony.utils import throw

from socketify.db.fastpath.converters import overrides, sql2py_of
from socketify.db.fastpath.loader import PkLoader, loader_for, plain_execute
from socketify.db.fastpath.providers import raise_translated
from socketify.db.rows import plain_row

__all__ = ["read_row"]

_COLUMNS = "_socketify_row_columns_"
_NOT_PLAIN = False


def read_row(entity: Any, key: Any) -> dict[str, Any]:
    """`entity[key].to_dict()` as plain values, read without making an entity object."""
    loader = loader_for(entity)
    columns = None if loader is None else _columns(loader)
    pkval = None if columns is None or type(key) is tuple else loader.pkval(key)  # type: ignore[union-attr]
    if pkval is None:
        return plain_row(entity, key)
    assert loader is not None and columns is not None
    state = core.local.__dict__
    cache = state["db2cache"].get(loader.db)
    session = state["db_session"]
    if (
        cache is None
        and session is not None
        and not session.immediate
        and not state["debug"]
        and hasattr(loader.db.provider, "prepare_read")  # our fast providers
    ):
        row = _read_borrowed(loader, pkval)
    else:
        fetched = loader.fetch(pkval, state)
        if fetched is None:
            return plain_row(entity, key)
        row = fetched[1]
    values = {}
    for name, offset, sql2py, converter in columns:
        value = row[offset]
        if value is not None and sql2py is not None:
            value = sql2py(value)
        if converter is not None:
            value = converter.dbval2val(value)  # without an object: JSON as plain values
        values[name] = value
    return values


def _read_borrowed(loader: PkLoader, pkval: Any, retry: bool = True) -> Any:
    """The row of `pkval` read on a connection borrowed from the pool for this statement."""
    provider = loader.db.provider
    pool = provider.pool
    connection, _ = provider.connect()  # a pool slot; `@db.on_connect` hooks for a new one
    try:
        provider.prepare_read(connection)
        cursor = connection.cursor()
        prepared = loader.prepared  # PostgreSQL: the statement prepared on the connection
        try:
            ran = prepared is not None and prepared.run(connection, cursor, pkval)
        except Exception as error:
            raise_translated(provider, error)  # a lost connection, as Pony reports it
        if not ran:
            plain_execute(provider)(cursor, loader.sql, loader.arguments_for(pkval))
        rows = cursor.fetchmany(2)
    except Exception as exc:
        if retry and provider.should_reconnect(getattr(exc, "original_exc", exc)):
            pool.drop(connection)  # the server went away: one more try, as Pony's reconnect
            return _read_borrowed(loader, pkval, retry=False)
        pool.release(connection)  # resets it, or discards it when that fails
        raise
    except BaseException:
        pool.drop(connection)  # interrupted mid-statement (a timeout): state unknown
        raise
    pool.release(connection)
    if len(rows) == 2:
        throw(
            MultipleObjectsFoundError,
            f"Multiple objects were found. Use {loader.cls.__name__}.select(...) to retrieve them",
        )
    if not rows:
        throw(ObjectNotFound, loader.cls, pkval)
    return rows[0]


def _columns(loader: PkLoader) -> list[tuple[str, int, Any, Any]] | None:
    columns = loader.__dict__.get(_COLUMNS)
    if columns is None:
        columns = _row_columns(loader.cls, loader.attr_offsets)
        setattr(loader, _COLUMNS, _NOT_PLAIN if columns is None else columns)
    return None if columns is _NOT_PLAIN else columns


def _row_columns(cls: Any, attr_offsets: Any) -> list[tuple[str, int, Any, Any]] | None:
    """(name, offset, sql2py or None, converter with dbval2val or None) for what `to_dict()`
    returns, in its order; None when an attribute is not a plain column of the row (relations
    keyed by several columns, the column-less side of a one-to-one)."""
    columns = []
    for attr in cls._get_attrs_(None, None, False, False):
        offsets = attr_offsets.get(attr)
        if offsets is None or len(offsets) != 1:
            return None
        if attr.reverse:
            target = attr.py_type
            if len(target._pk_attrs_) != 1 or target._pk_attrs_[0].reverse:
                return None
            converter = target._pk_converters_[0]
            to_value = None
        else:
            converter = attr.converters[0]
            to_value = converter if overrides(converter, "dbval2val") else None
        sql2py = sql2py_of(converter)
        columns.append((attr.name, offsets[0], sql2py, to_value))
    return columns
