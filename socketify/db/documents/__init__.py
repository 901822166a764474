"""`socketify.db.documents`: a small document store with MongoDB's query operators.

    from socketify.db import documents

    store = documents.open("memory://")        # or sqlite:///docs.db, postgres://..., a
    notes = store["notes"]                     # socketify.db Database, or mongodb://...
    notes.create_index("slug", unique=True)
    note = notes.insert({"slug": "hello", "views": 3})     # -> {"_id": "...", ...}
    notes.find({"views": {"$gte": 2}}, sort=[("views", -1)], limit=10, skip=0)
    notes.update({"_id": note["_id"]}, {"views": 4})
    notes.delete({"slug": "hello"})

Engines: memory (per process), SQLite and PostgreSQL JSON columns (through a socketify.db
Database and its pool, inside the request's `db_session` when there is one), and MongoDB via
pymongo. `DuplicateKeyError` is answered 409 by the database middleware.
"""

from __future__ import annotations

from typing import Any

from socketify.db.documents.collection import Collection, DocumentStore, Engine
from socketify.db.documents.errors import DocumentError, DuplicateKeyError, InvalidQuery
from socketify.db.documents.memory import MemoryEngine

__all__ = [
    "Collection",
    "DocumentError",
    "DocumentStore",
    "DuplicateKeyError",
    "Engine",
    "InvalidQuery",
    "MemoryEngine",
    "open",
]


def open(target: Any) -> DocumentStore:
    """A store on `target`: "memory://", "mongodb://...", a SQL URL, or a socketify Database."""
    if not isinstance(target, str):
        from socketify.db.documents.sql import SQLEngine

        return DocumentStore(SQLEngine(target))
    if target.startswith("memory://"):
        return DocumentStore(MemoryEngine())
    if target.startswith(("mongodb://", "mongodb+srv://")):
        from socketify.db.documents.mongo import MongoEngine

        return DocumentStore(MongoEngine(target))
    from socketify.db import connect
    from socketify.db.documents.sql import SQLEngine

    return DocumentStore(SQLEngine(connect(target)))
