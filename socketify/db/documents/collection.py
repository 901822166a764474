"""`DocumentStore` and `Collection`: the API every engine shares; engines see checked input.

Documents are JSON objects. `insert` copies the document, gives it an `_id` (a 32-hex string)
unless it has one, and returns the stored copy, id included. Everything returned is a copy:
changing it changes nothing stored.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import orjson

from socketify.db.documents.errors import DocumentError, InvalidQuery
from socketify.db.documents.query import (
    Condition,
    SortKey,
    parse_changes,
    parse_filter,
    parse_path,
    parse_sort,
)

__all__ = ["Collection", "DocumentStore", "Engine"]

_COLLECTION = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*")
Changes = list[tuple[tuple[str, ...], Any]]


class Engine(Protocol):
    """Storage for collections; every argument has been validated by `Collection`."""

    def insert(self, collection: str, docs: list[dict[str, Any]]) -> None:
        """Store documents that all carry an `_id`; all or none (DuplicateKeyError)."""

    def find(
        self,
        collection: str,
        conditions: list[Condition],
        sort: list[SortKey],
        limit: int | None,
        skip: int,
    ) -> list[dict[str, Any]]:
        """Matching documents: filtered, then sorted, then skipped and limited."""

    def count(self, collection: str, conditions: list[Condition]) -> int:
        """How many documents match."""

    def update(self, collection: str, conditions: list[Condition], changes: Changes) -> int:
        """Set `changes` on every match, all or none; returns how many matched."""

    def delete(self, collection: str, conditions: list[Condition]) -> int:
        """Delete every match; returns how many."""

    def create_index(self, collection: str, path: tuple[str, ...], unique: bool) -> None:
        """Index `path`; a unique index refuses duplicates from now on (and now)."""

    def drop(self, collection: str) -> None:
        """Delete the collection and its indexes."""


class Collection:
    """A named set of documents in a store."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name

    def insert(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Store a copy of `doc`; returns it with its `_id`."""
        return self.insert_many([doc])[0]

    def insert_many(self, docs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Store copies of `docs`, all or none; returns them with their ids."""
        stored = [_prepare(doc) for doc in docs]
        if stored:
            self.engine.insert(self.name, stored)
        return [_copy(doc) for doc in stored]

    def find(
        self,
        filter: Mapping[str, Any] | None = None,
        *,
        sort: str | Iterable[Any] | None = None,
        limit: int | None = None,
        skip: int = 0,
    ) -> list[dict[str, Any]]:
        """Documents matching `filter`, sorted by `sort` before `skip` and `limit` apply."""
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidQuery("limit is a non-negative integer or None")
        if not isinstance(skip, int) or skip < 0:
            raise InvalidQuery("skip is a non-negative integer")
        return self.engine.find(self.name, parse_filter(filter), parse_sort(sort), limit, skip)

    def find_one(
        self, filter: Mapping[str, Any] | None = None, *, sort: str | Iterable[Any] | None = None
    ) -> dict[str, Any] | None:
        """The first match, or None."""
        found = self.find(filter, sort=sort, limit=1)
        return found[0] if found else None

    def get(self, id: str) -> dict[str, Any] | None:
        """The document with this `_id`, or None."""
        return self.find_one({"_id": id})

    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match `filter`."""
        return self.engine.count(self.name, parse_filter(filter))

    def update(self, filter: Mapping[str, Any], changes: Mapping[str, Any]) -> int:
        """Set `changes` (dotted paths allowed) on every match; returns how many matched."""
        return self.engine.update(self.name, parse_filter(filter), parse_changes(changes))

    def delete(self, filter: Mapping[str, Any]) -> int:
        """Delete every match; an empty filter is refused (use `clear()`)."""
        conditions = parse_filter(filter)
        if not conditions:
            raise InvalidQuery("delete() needs a filter; clear() deletes every document")
        return self.engine.delete(self.name, conditions)

    def clear(self) -> int:
        """Delete every document (indexes stay); returns how many."""
        return self.engine.delete(self.name, [])

    def create_index(self, field: str, *, unique: bool = False) -> None:
        """Index `field`; with `unique=True` two documents may not share a value of it."""
        self.engine.create_index(self.name, parse_path(field), unique)

    def drop(self) -> None:
        """Delete the collection, its documents and indexes."""
        self.engine.drop(self.name)

    def __repr__(self) -> str:
        return f"<Collection {self.name}>"


class DocumentStore:
    """Collections on one engine: `store["notes"]` or `store.collection("notes")`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collection(self, name: str) -> Collection:
        """The collection `name` (created on first write)."""
        if not isinstance(name, str) or not _COLLECTION.fullmatch(name) or len(name) > 40:
            raise InvalidQuery(
                f"invalid collection name {name!r}: letters and digits, single underscores"
            )
        return Collection(self.engine, name)

    def __getitem__(self, name: str) -> Collection:
        return self.collection(name)

    def close(self) -> None:
        """Release the engine's resources."""
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()


def _prepare(doc: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(doc, Mapping):
        raise InvalidQuery(f"a document is a dict, not {type(doc).__name__}")
    try:
        stored: dict[str, Any] = orjson.loads(orjson.dumps(doc))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise DocumentError(f"documents must be JSON: {exc}") from exc
    ident = stored.pop("_id", None)
    if ident is None:
        ident = uuid.uuid4().hex
    elif not isinstance(ident, str) or not ident:
        raise InvalidQuery("_id is a non-empty string")
    return {"_id": ident, **stored}


def _copy(doc: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(doc))
    return copied
