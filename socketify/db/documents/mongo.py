"""MongoDB through pymongo (installed separately: `pip install socketify-gevent[mongo]`).

Filters and sorts are already MongoDB's language, so they pass through after validation.
Differences from the other engines, all MongoDB's own rules: equality with an array field
matches when the array *contains* the value; a unique index is sparse (documents without the
field are not indexed, but two documents with `null` collide); ties in a sort have no fixed
order. The client is created on first use in each process, never carried across fork.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from socketify.db.documents.errors import DuplicateKeyError
from socketify.db.documents.query import Condition, SortKey

__all__ = ["MongoEngine"]

Changes = list[tuple[tuple[str, ...], Any]]


class MongoEngine:
    """Collections in a MongoDB database."""

    def __init__(self, url: str) -> None:
        import pymongo  # fail early, with the import error, when the driver is missing

        self._pymongo = pymongo
        self.url = url
        self.database_name = urlsplit(url).path.lstrip("/") or "test"
        self._client: Any = None
        self._pid = 0

    def _collection(self, name: str) -> Any:
        if self._client is None or self._pid != os.getpid():
            # pymongo's client owns threads and sockets that do not survive fork.
            self._client = self._pymongo.MongoClient(self.url, serverSelectionTimeoutMS=5000)
            self._pid = os.getpid()
        return self._client[self.database_name][name]

    def insert(self, collection: str, docs: list[dict[str, Any]]) -> None:
        """insert_many; a duplicate key raises DuplicateKeyError."""
        with _duplicates(self._pymongo):
            self._collection(collection).insert_many([dict(doc) for doc in docs], ordered=True)

    def find(
        self,
        collection: str,
        conditions: list[Condition],
        sort: list[SortKey],
        limit: int | None,
        skip: int,
    ) -> list[dict[str, Any]]:
        """find().sort().skip().limit()."""
        if limit == 0:
            return []  # pymongo reads limit 0 as "no limit"
        cursor = self._collection(collection).find(_filter(conditions))
        if sort:
            cursor = cursor.sort([(".".join(path), direction) for path, direction in sort])
        cursor = cursor.skip(skip)
        if limit is not None:
            cursor = cursor.limit(limit)
        return [dict(doc) for doc in cursor]

    def count(self, collection: str, conditions: list[Condition]) -> int:
        """count_documents."""
        return int(self._collection(collection).count_documents(_filter(conditions)))

    def update(self, collection: str, conditions: list[Condition], changes: Changes) -> int:
        """update_many with $set; returns how many matched."""
        update = {"$set": {".".join(path): value for path, value in changes}}
        with _duplicates(self._pymongo):
            result = self._collection(collection).update_many(_filter(conditions), update)
        return int(result.matched_count)

    def delete(self, collection: str, conditions: list[Condition]) -> int:
        """delete_many."""
        return int(self._collection(collection).delete_many(_filter(conditions)).deleted_count)

    def create_index(self, collection: str, path: tuple[str, ...], unique: bool) -> None:
        """create_index; unique indexes are sparse."""
        with _duplicates(self._pymongo):
            self._collection(collection).create_index(
                [(".".join(path), self._pymongo.ASCENDING)], unique=unique, sparse=unique
            )

    def drop(self, collection: str) -> None:
        """drop the collection."""
        self._collection(collection).drop()

    def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()
            self._client = None


def _filter(conditions: list[Condition]) -> dict[str, Any]:
    if not conditions:
        return {}
    return {"$and": [{c.field: {c.op: c.value}} for c in conditions]}


class _duplicates:
    """Context manager: pymongo's DuplicateKeyError becomes ours, naming the field."""

    def __init__(self, pymongo: Any) -> None:
        self.error = pymongo.errors.DuplicateKeyError

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if exc is not None and isinstance(exc, self.error):
            pattern = (getattr(exc, "details", None) or {}).get("keyPattern") or {"_id": 1}
            raise DuplicateKeyError(next(iter(pattern))) from None
