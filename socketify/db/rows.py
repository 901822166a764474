"""`get_row(Entity, pk)`: a row as a plain dict, for read-only answers.

    @server.get("/users/:id")
    def show(req, res):
        res.json(socketify.db.get_row(User, int(req.params["id"])))

The answer is what `Entity[pk].to_dict()` returns — attribute names to values, a relation as
the related primary key, JSON as plain dicts and lists, lazy attributes and collections left
out. With the fast path on, it is read with the entity's compiled SELECT and no entity object
is made (socketify.db.fastpath.rows); off, it is Pony's `Entity[pk].to_dict()`.

A missing row raises `ObjectNotFound` (404 through the middleware). Outside a `db_session`
it raises Pony's `TransactionError`, as `Entity[pk]` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pony.orm.ormtypes import TrackedValue

__all__ = ["ROW_READERS", "get_row", "plain_row"]

# Readers by entity metaclass: the fast path registers its own for the entities it builds.
ROW_READERS: dict[type, Callable[[Any, Any], dict[str, Any]]] = {}


def get_row(entity: Any, key: Any) -> dict[str, Any]:
    """`entity[key].to_dict()` as plain values, read without an entity object when it can be."""
    read = ROW_READERS.get(type(entity))
    if read is not None:
        return read(entity, key)
    return plain_row(entity, key)


def plain_row(entity: Any, key: Any) -> dict[str, Any]:
    """`entity[key].to_dict()`, JSON values as the plain dicts and lists they track."""
    return {
        name: value.get_untracked() if isinstance(value, TrackedValue) else value
        for name, value in entity[key].to_dict().items()
    }
