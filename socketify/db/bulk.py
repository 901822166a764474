"""Many rows of an entity's table at once, without making an entity object per row.

    rows = socketify.db.select_columns(Fortune, "id", "message")   # [(1, "..."), ...]
    rows = socketify.db.get_columns(World, [17, 42], "id", "randomNumber")  # [(17, ..), (42, ..)]
    socketify.db.update_rows(World, ["randomNumber"], [(17, 4242), (18, 7)])

Pony builds an entity object for every row it loads and, at commit, writes each changed
object with an UPDATE of its own. For a read-only page of many rows, and for a batch of rows
whose new values the handler already knows, these two do the same work in one statement:

* `select_columns(Entity, *names)`: every row of the table as tuples of the named attributes,
  in the order of the primary key, through a prepared statement (socketify.db.statements);
* `get_columns(Entity, keys, *names)`: the row of each primary key, in the order given, each
  read with a SELECT of its own; on PostgreSQL with psycopg 3 they travel together in one
  round trip (socketify.db.pipeline);
* `update_rows(Entity, names, rows)`: each row is `(primary key, value, ...)`; on PostgreSQL
  one `UPDATE ... FROM (VALUES ...)` writes them all in the session's transaction (one
  round trip per 100 rows), elsewhere one UPDATE per row through the driver's `executemany`.

Both read Pony's mapping of the entity (table, columns, SQL types) and bypass its identity
map: an object of the same row already loaded in the session keeps the values it was loaded
with, and Pony's optimistic checks do not see these writes. Use them for rows the session
does not also change through entity objects. Each attribute must be stored in one column.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from pony.orm.core import ObjectNotFound
from pony.utils import throw

from socketify.db.statements import Statement, raise_translated

__all__ = ["get_columns", "select_columns", "update_rows"]

# Rows one UPDATE writes on PostgreSQL.
PAGE_SIZE = 100


def select_columns(entity: Any, *names: str) -> list[tuple[Any, ...]]:
    """Every row of `entity`'s table as a tuple of the attributes `names`, by primary key."""
    return _select_statement(entity, names).all()


def get_columns(entity: Any, keys: Iterable[Any], *names: str) -> list[tuple[Any, ...]]:
    """The attributes `names` of the row of each primary key in `keys`, in that order;
    Pony's `ObjectNotFound` (a 404 through the middleware) when a key has no row."""
    keys = list(keys)
    rows = _key_statement(entity, names).one_each([(key,) for key in keys])
    for key, row in zip(keys, rows, strict=True):
        if row is None:
            throw(ObjectNotFound, entity, key)
    return rows  # type: ignore[return-value]


def update_rows(entity: Any, names: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Set the attributes `names` of the rows `(primary key, *values)` in one statement on
    PostgreSQL (per 100 rows), in the session's transaction."""
    names = tuple(names)
    batch = [tuple(row) for row in rows]
    for row in batch:
        if len(row) != len(names) + 1:
            raise TypeError(f"each row is (primary key, {', '.join(names)}): got {row!r}")
    if not batch:
        return
    db = entity._database_
    if db.url.dialect != "postgres":
        _update_statement(entity, names).run_many([(*row[1:], row[0]) for row in batch])
        return
    from psycopg2.extras import execute_values

    sql, template = _values_update(entity, names)
    connection = db.get_connection()  # Pony's: the session's, transaction begun
    try:
        execute_values(connection.cursor(), sql, batch, template=template, page_size=PAGE_SIZE)
    except Exception as error:
        raise_translated(db.provider, error)


def _column(entity: Any, name: str) -> Any:
    attr = entity._adict_.get(name)
    if attr is None:
        raise AttributeError(f"{entity.__name__} has no attribute {name!r}")
    if attr.is_collection or len(attr.columns) != 1:
        raise ValueError(f"{entity.__name__}.{name} is not stored in one column")
    return attr


def _table(entity: Any) -> str:
    db = entity._database_
    if db.schema is None:
        raise RuntimeError("call db.generate_mapping() first")
    table = entity._table_
    quote = db.provider.quote_name
    return quote(table) if isinstance(table, str) else ".".join(map(quote, table))


@functools.cache
def _select_statement(entity: Any, names: tuple[str, ...]) -> Statement:
    quote = entity._database_.provider.quote_name
    columns = ", ".join(quote(_column(entity, name).column) for name in names)
    order = ", ".join(quote(column) for attr in entity._pk_attrs_ for column in attr.columns)
    return entity._database_.statement(f"SELECT {columns} FROM {_table(entity)} ORDER BY {order}")


@functools.cache
def _key_statement(entity: Any, names: tuple[str, ...]) -> Statement:
    quote = entity._database_.provider.quote_name
    columns = ", ".join(quote(_column(entity, name).column) for name in names)
    where = f"{quote(_primary_key(entity).column)} = $1"
    return entity._database_.statement(f"SELECT {columns} FROM {_table(entity)} WHERE {where}")


@functools.cache
def _update_statement(entity: Any, names: tuple[str, ...]) -> Statement:
    quote = entity._database_.provider.quote_name
    key = _primary_key(entity)
    sets = ", ".join(
        f"{quote(_column(entity, name).column)} = ${n}" for n, name in enumerate(names, 1)
    )
    where = f"{quote(key.column)} = ${len(names) + 1}"
    return entity._database_.statement(f"UPDATE {_table(entity)} SET {sets} WHERE {where}")


@functools.cache
def _values_update(entity: Any, names: tuple[str, ...]) -> tuple[str, str]:
    """PostgreSQL's `UPDATE ... FROM (VALUES %s)` for `execute_values`, and its row template
    (each value cast to its column's type, so a text literal lands in a typed column)."""
    quote = entity._database_.provider.quote_name
    key = _primary_key(entity)
    attrs = [key, *(_column(entity, name) for name in names)]
    aliases = [f"v{n}" for n in range(len(attrs))]
    sets = ", ".join(
        f"{quote(attr.column)} = new.{alias}"
        for attr, alias in zip(attrs[1:], aliases[1:], strict=True)
    )
    sql = (
        f"UPDATE {_table(entity)} AS old SET {sets}"
        f" FROM (VALUES %s) AS new({', '.join(aliases)})"
        f" WHERE old.{quote(key.column)} = new.{aliases[0]}"
    )
    template = "(" + ", ".join(f"%s::{attr.converters[0].get_sql_type()}" for attr in attrs) + ")"
    return sql, template


def _primary_key(entity: Any) -> Any:
    if len(entity._pk_attrs_) != 1 or len(entity._pk_attrs_[0].columns) != 1:
        raise ValueError(f"{entity.__name__} needs a single-column primary key here")
    return entity._pk_attrs_[0]
