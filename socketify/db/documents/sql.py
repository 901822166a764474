"""Documents in SQLite (JSON text) or PostgreSQL (jsonb), through a socketify Database.

One table per collection, `docs_<name>(seq, id, body)`: `seq` keeps insertion order for
stable sorting, `id` is the document's `_id`. Every operation runs in Pony's `db_session` —
its own transaction when called alone, the request's when called inside the database
middleware — so it uses the same bounded pool. Writes run inside a SAVEPOINT: a unique
violation undoes that one operation (all of an `update`, none of the others) and leaves the
surrounding transaction usable.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from pony.orm import db_session

from socketify.db.documents.errors import DuplicateKeyError
from socketify.db.documents.query import Condition, SortKey, apply_changes, matches
from socketify.db.documents.sqlquery import Compiled, dialect_for, order_by
from socketify.db.errors import integrity_error, is_unique_violation

__all__ = ["SQLEngine"]

Changes = list[tuple[tuple[str, ...], Any]]
_DDL = {
    "sqlite": 'CREATE TABLE IF NOT EXISTS "{t}" (seq INTEGER PRIMARY KEY AUTOINCREMENT, '
    "id TEXT NOT NULL UNIQUE, body TEXT NOT NULL)",
    "postgres": 'CREATE TABLE IF NOT EXISTS "{t}" (seq BIGSERIAL PRIMARY KEY, '
    "id TEXT NOT NULL UNIQUE, body JSONB NOT NULL)",
}


class SQLEngine:
    """The document engine on a socketify (Pony) Database."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.dialect = dialect_for(db.dialect)
        self._ready: set[str] = set()

    # -- plumbing --------------------------------------------------------------------------------

    def _table(self, collection: str) -> str:
        table = f"docs_{collection}"
        if table not in self._ready:
            with db_session:
                self.db.execute(_DDL[self.dialect.name].format(t=table))
            self._ready.add(table)
        return table

    def _select(self, sql: str, params: dict[str, Any]) -> list[Any]:
        rows: list[Any] = self.db.select(sql, {}, params)
        return rows

    def _execute(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        return self.db.execute(sql, {}, params or {})

    def _load(self, body: Any) -> dict[str, Any]:
        loaded: dict[str, Any] = orjson.loads(body) if isinstance(body, str | bytes) else body
        # jsonb stores keys in its own order; put `_id` first again, as it was inserted.
        return {"_id": loaded.pop("_id"), **loaded}

    def _write(self, table: str, action: Any, path: tuple[str, ...] | None = None) -> Any:
        """Run `action()` in a savepoint; a unique violation undoes it, named by field."""
        with db_session:
            self._execute("SAVEPOINT socketify_docs")
            try:
                result = action()
            except Exception as exc:
                self._execute("ROLLBACK TO SAVEPOINT socketify_docs")
                field = _duplicate_field(exc, table, path)
                if field is not None:
                    raise DuplicateKeyError(field) from None
                raise
            self._execute("RELEASE SAVEPOINT socketify_docs")
            return result

    def _rows(self, table: str, conditions: list[Condition]) -> list[tuple[str, dict[str, Any]]]:
        """(id, document) of every match, in insertion order."""
        compiled = self.dialect.compile(conditions)
        rows = self._select(
            f'SELECT id, body FROM "{table}" WHERE {compiled.where} ORDER BY seq', compiled.params
        )
        found = [(ident, self._load(body)) for ident, body in rows]
        if compiled.exact:
            return found
        return [(ident, doc) for ident, doc in found if matches(doc, conditions)]

    # -- the engine ----------------------------------------------------------------------------

    def insert(self, collection: str, docs: list[dict[str, Any]]) -> None:
        """INSERT each document; all or none."""
        table = self._table(collection)

        def action() -> None:
            for doc in docs:
                body = orjson.dumps(doc).decode()
                self._execute(
                    f'INSERT INTO "{table}" (id, body) VALUES ($ident, {self._cast("body")})',
                    {"ident": doc["_id"], "body": body},
                )

        self._write(table, action)

    def _cast(self, param: str) -> str:
        return f"CAST(${param} AS jsonb)" if self.dialect.name == "postgres" else f"${param}"

    def find(
        self,
        collection: str,
        conditions: list[Condition],
        sort: list[SortKey],
        limit: int | None,
        skip: int,
    ) -> list[dict[str, Any]]:
        """SELECT ... ORDER BY ... LIMIT ... OFFSET ..., or filter in Python when inexact."""
        table = self._table(collection)
        compiled = self.dialect.compile(conditions)
        sql = f'SELECT body FROM "{table}" WHERE {compiled.where} {order_by(self.dialect, sort)}'
        if compiled.exact:
            sql += _page(self.dialect.name, limit, skip)
        with db_session:
            docs = [self._load(body) for body in self._select(sql, compiled.params)]
        if compiled.exact:
            return docs
        end = None if limit is None else skip + limit
        return [doc for doc in docs if matches(doc, conditions)][skip:end]

    def count(self, collection: str, conditions: list[Condition]) -> int:
        """SELECT COUNT(*), or count in Python when inexact."""
        table = self._table(collection)
        compiled: Compiled = self.dialect.compile(conditions)
        with db_session:
            if not compiled.exact:
                return len(self._rows(table, conditions))
            rows = self._select(
                f'SELECT COUNT(*) FROM "{table}" WHERE {compiled.where}', compiled.params
            )
        return int(rows[0])

    def update(self, collection: str, conditions: list[Condition], changes: Changes) -> int:
        """Rewrite every matching document's body; all or none."""
        table = self._table(collection)

        def action() -> int:
            rows = self._rows(table, conditions)
            for ident, doc in rows:
                body = orjson.dumps(apply_changes(doc, changes)).decode()
                self._execute(
                    f'UPDATE "{table}" SET body = {self._cast("body")} WHERE id = $ident',
                    {"ident": ident, "body": body},
                )
            return len(rows)

        updated: int = self._write(table, action)
        return updated

    def delete(self, collection: str, conditions: list[Condition]) -> int:
        """DELETE the matches."""
        table = self._table(collection)
        compiled = self.dialect.compile(conditions)

        def action() -> int:
            if compiled.exact:
                cursor = self._execute(
                    f'DELETE FROM "{table}" WHERE {compiled.where}', compiled.params
                )
                return int(cursor.rowcount)
            rows = self._rows(table, conditions)
            for ident, _doc in rows:
                self._execute(f'DELETE FROM "{table}" WHERE id = $ident', {"ident": ident})
            return len(rows)

        deleted: int = self._write(table, action)
        return deleted

    def create_index(self, collection: str, path: tuple[str, ...], unique: bool) -> None:
        """An expression index on the JSON path; unique ones skip missing and null values."""
        table = self._table(collection)
        index = _index_name(table, path, unique)
        if unique:
            sql = self.dialect.unique_index(table, index, path)
        else:
            sql = self.dialect.plain_index(table, index, path)
        self._write(table, lambda: self._execute(sql), path)

    def drop(self, collection: str) -> None:
        """DROP TABLE (its indexes go with it)."""
        table = f"docs_{collection}"
        with db_session:
            self._execute(f'DROP TABLE IF EXISTS "{table}"')
        self._ready.discard(table)


def _page(dialect: str, limit: int | None, skip: int) -> str:
    if limit is None and not skip:
        return ""
    # OFFSET needs a LIMIT before it in SQLite; "no limit" is -1 there and ALL in PostgreSQL.
    unlimited = "-1" if dialect == "sqlite" else "ALL"
    return f" LIMIT {unlimited if limit is None else limit} OFFSET {skip}"


def _index_name(table: str, path: tuple[str, ...], unique: bool) -> str:
    # Readable where it fits PostgreSQL's 63 bytes: a unique violation names the index, and
    # the field is read back from it.
    prefix = "ux" if unique else "ix"
    field = "__".join(path)
    name = f"{prefix}_{table}__{field}"
    if len(name) <= 63:
        return name
    return f"{prefix}_{table}__h{hashlib.sha1(field.encode()).hexdigest()[:12]}"


def _duplicate_field(exc: BaseException, table: str, path: tuple[str, ...] | None) -> str | None:
    """The field a unique violation was about, or None if `exc` is something else."""
    error = integrity_error(exc)
    if error is None or not is_unique_violation(error):
        return None
    text = str(error)
    marker = f"ux_{table}__"
    if marker not in text:
        return "_id"  # the table's own UNIQUE(id)
    name = text.split(marker, 1)[1].split("'")[0].split('"')[0]
    if name.startswith("h") and path is not None:
        return ".".join(path)  # a hashed name, but we know which index was being built
    return name.replace("__", ".")
