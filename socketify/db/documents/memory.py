"""`memory://`: documents in this process's memory, for tests and development.

Each `open("memory://")` is a separate, empty store (nothing is shared process-wide), and
each worker process has its own. Unique indexes are enforced; an update or
insert that would break one changes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson

from socketify.db.documents.errors import DuplicateKeyError
from socketify.db.documents.query import (
    Condition,
    SortKey,
    apply_changes,
    index_key,
    lookup,
    matches,
    sort_documents,
)

__all__ = ["MemoryEngine"]

Changes = list[tuple[tuple[str, ...], Any]]


class _Collection:
    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}  # by _id, in insertion order
        self.unique: set[tuple[str, ...]] = set()
        self.indexed: set[tuple[str, ...]] = set()


class MemoryEngine:
    """Collections held in dicts; every operation is atomic."""

    def __init__(self) -> None:
        self._collections: dict[str, _Collection] = {}
        # Held only by code that never yields, so under gevent no greenlet ever waits on it;
        # it matters only to real threads.
        self._lock = threading.RLock()

    def _get(self, name: str) -> _Collection:
        found = self._collections.get(name)
        if found is None:
            found = self._collections[name] = _Collection()
        return found

    def insert(self, collection: str, docs: list[dict[str, Any]]) -> None:
        """Store documents (already copied, with ids); all or none."""
        with self._lock:
            coll = self._get(collection)
            after = dict(coll.docs)
            for doc in docs:
                if doc["_id"] in after:
                    raise DuplicateKeyError("_id")
                after[doc["_id"]] = doc
            _check_unique(coll, after)
            coll.docs = after

    def find(
        self,
        collection: str,
        conditions: list[Condition],
        sort: list[SortKey],
        limit: int | None,
        skip: int,
    ) -> list[dict[str, Any]]:
        """Filter, sort, then skip and limit (in that order); returns copies."""
        with self._lock:
            coll = self._get(collection)
            found = [doc for doc in coll.docs.values() if matches(doc, conditions)]
        if sort:
            found = sort_documents(found, sort)
        end = None if limit is None else skip + limit
        return [_copy(doc) for doc in found[skip:end]]

    def count(self, collection: str, conditions: list[Condition]) -> int:
        """How many match."""
        with self._lock:
            return sum(1 for doc in self._get(collection).docs.values() if matches(doc, conditions))

    def update(self, collection: str, conditions: list[Condition], changes: Changes) -> int:
        """Apply `changes` to every match, or to none if a unique index would break."""
        with self._lock:
            coll = self._get(collection)
            after = dict(coll.docs)
            updated = 0
            for ident, doc in coll.docs.items():
                if matches(doc, conditions):
                    after[ident] = apply_changes(doc, changes)
                    updated += 1
            _check_unique(coll, after)
            coll.docs = after
            return updated

    def delete(self, collection: str, conditions: list[Condition]) -> int:
        """Delete every match."""
        with self._lock:
            coll = self._get(collection)
            kept = {k: d for k, d in coll.docs.items() if not matches(d, conditions)}
            deleted = len(coll.docs) - len(kept)
            coll.docs = kept
            return deleted

    def create_index(self, collection: str, path: tuple[str, ...], unique: bool) -> None:
        """Record the index; a unique one is checked against the documents already there."""
        with self._lock:
            coll = self._get(collection)
            if unique:
                _check_unique_path(coll.docs, path)
                coll.unique.add(path)
            else:
                coll.indexed.add(path)  # nothing to speed up in memory; kept for symmetry

    def drop(self, collection: str) -> None:
        """Forget the collection."""
        with self._lock:
            self._collections.pop(collection, None)


def _check_unique(coll: _Collection, docs: dict[str, dict[str, Any]]) -> None:
    for path in coll.unique:
        _check_unique_path(docs, path)


def _check_unique_path(docs: dict[str, dict[str, Any]], path: tuple[str, ...]) -> None:
    seen: set[Any] = set()
    for doc in docs.values():
        key = index_key(lookup(doc, path))
        if key is None:
            continue
        if key in seen:
            raise DuplicateKeyError(".".join(path))
        seen.add(key)


def _copy(doc: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(doc))
    return copied
