"""Compile document filters and sorts to SQL over a JSON column, for SQLite and PostgreSQL.

Every field test first checks the value's JSON type, so the SQL agrees with `query.py`:
numbers only compare with numbers, a missing field is not NULL-equal to anything, booleans
are not 0/1. Expressions are built so they are never NULL, which keeps `NOT (...)` (for `$ne`
and `$nin`) exact. What SQLite cannot express exactly (equality with an object or array) is
left out of the SQL and marked inexact; the engine then re-checks rows in Python and applies
skip/limit itself.

Paths are inlined as literals — they are validated to `[A-Za-z0-9_-]` segments — so that an
expression index on the same path can serve the query. Values are always parameters, written
`$pN` for Pony's `db.select`/`db.execute` (which is also why a literal `$` is written `$$`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from socketify.db.documents.query import Condition, SortKey, kind

__all__ = ["Compiled", "SQLDialect", "dialect_for"]


@dataclass
class Compiled:
    """A WHERE clause (or "1 = 1"), its parameters, and whether it is exact."""

    where: str = "1 = 1"
    params: dict[str, Any] = field(default_factory=dict)
    exact: bool = True


class SQLDialect:
    """The JSON vocabulary of one SQL dialect; subclasses fill in the expressions."""

    name = ""
    KINDS: dict[str, tuple[str, ...]] = {}  # our kind -> the dialect's type names

    def type_of(self, path: tuple[str, ...]) -> str:
        """The JSON type name at `path`, 'missing' when absent; never NULL."""
        raise NotImplementedError

    def compare(self, path: tuple[str, ...], op: str, value: Any, param: str) -> str | None:
        """SQL for `value at path <op> $param` between equal kinds, or None if inexact."""
        raise NotImplementedError

    def order(self, path: tuple[str, ...], direction: str) -> list[str]:
        """ORDER BY terms sorting like `query.sort_documents`."""
        raise NotImplementedError

    def unique_index(self, table: str, index: str, path: tuple[str, ...]) -> str:
        """CREATE UNIQUE INDEX that treats missing and null as 'not indexed'."""
        raise NotImplementedError

    def plain_index(self, table: str, index: str, path: tuple[str, ...]) -> str:
        """CREATE INDEX for lookups on `path`."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------

    def compile(self, conditions: list[Condition]) -> Compiled:
        """AND of every condition, as far as SQL can say it exactly."""
        out = Compiled()
        parts = []
        for condition in conditions:
            sql = self._condition(condition, out.params)
            if sql is None:
                out.exact = False
            else:
                parts.append(sql)
        if parts:
            out.where = " AND ".join(parts)
        return out

    def _kind_test(self, path: tuple[str, ...], wanted: str) -> str:
        names = ", ".join(f"'{name}'" for name in self.KINDS[wanted])
        return f"{self.type_of(path)} IN ({names})"

    def _equal(self, path: tuple[str, ...], value: Any, params: dict[str, Any]) -> str | None:
        found = kind(value)
        if found == "null":
            return f"{self.type_of(path)} IN ('missing', 'null')"
        param = f"p{len(params)}"
        sql = self.compare(path, "$eq", value, param)
        if sql is None:
            return None
        params[param] = self.param_value(value)
        return f"({self._kind_test(path, found)} AND {sql})"

    def param_value(self, value: Any) -> Any:
        """How a value is passed for an equality or comparison."""
        return value

    def _condition(self, c: Condition, params: dict[str, Any]) -> str | None:
        if c.op == "$exists":
            return f"{self.type_of(c.path)} {'<>' if c.value else '='} 'missing'"
        if c.op in ("$eq", "$ne"):
            sql = self._equal(c.path, c.value, params)
            return sql if sql is None or c.op == "$eq" else f"NOT {sql}"
        if c.op in ("$in", "$nin"):
            if not c.value:
                # An empty `$in` matches nothing, an empty `$nin` everything; never `IN ()`,
                # which is a syntax error in SQL.
                return "1 = 0" if c.op == "$in" else "1 = 1"
            tests = [self._equal(c.path, item, params) for item in c.value]
            if any(test is None for test in tests):
                return None
            either = "(" + " OR ".join(str(test) for test in tests) + ")"
            return either if c.op == "$in" else f"NOT {either}"
        param = f"p{len(params)}"
        sql = self.compare(c.path, c.op, c.value, param)
        if sql is None:
            return None
        params[param] = self.param_value(c.value)
        return f"({self._kind_test(c.path, kind(c.value))} AND {sql})"


_SQL_OPS = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


class SQLiteDialect(SQLDialect):
    """SQLite's JSON1 functions on a TEXT column."""

    name = "sqlite"
    KINDS = {
        "number": ("integer", "real"),
        "string": ("text",),
        "bool": ("true", "false"),
        "object": ("object",),
        "array": ("array",),
    }
    _RANK = (
        "CASE {t} WHEN 'integer' THEN 1 WHEN 'real' THEN 1 WHEN 'text' THEN 2 "
        "WHEN 'object' THEN 3 WHEN 'array' THEN 4 WHEN 'true' THEN 5 WHEN 'false' THEN 5 "
        "ELSE 0 END"
    )

    def _path(self, path: tuple[str, ...]) -> str:
        return "'$$" + "".join(f'."{part}"' for part in path) + "'"

    def extract(self, path: tuple[str, ...]) -> str:
        """The SQL value at `path` (numbers, text, 0/1 for booleans, JSON text otherwise)."""
        return f"json_extract(body, {self._path(path)})"

    def type_of(self, path: tuple[str, ...]) -> str:
        return f"IFNULL(json_type(body, {self._path(path)}), 'missing')"

    def compare(self, path: tuple[str, ...], op: str, value: Any, param: str) -> str | None:
        found = kind(value)
        if found in ("object", "array"):
            return None  # SQLite's JSON text keeps key order; Python equality does not
        if found == "bool":
            return f"{self.type_of(path)} = '{'true' if value else 'false'}'"
        return f"{self.extract(path)} {_SQL_OPS[op]} ${param}"

    def order(self, path: tuple[str, ...], direction: str) -> list[str]:
        rank = self._RANK.format(t=f"json_type(body, {self._path(path)})")
        # Within a rank every value has one type: numbers, BINARY-collated (code point)
        # text, or 0/1 booleans.
        return [f"{rank} {direction}", f"{self.extract(path)} {direction}"]

    def unique_index(self, table: str, index: str, path: tuple[str, ...]) -> str:
        # (kind, value): 1 and 1.0 collide as in Python, `true` and 1 do not; a NULL in either
        # column (missing or null) leaves the row out of the uniqueness check.
        kind_sql = (
            f"CASE json_type(body, {self._path(path)}) WHEN 'integer' THEN 'number' "
            f"WHEN 'real' THEN 'number' WHEN 'null' THEN NULL "
            f"ELSE json_type(body, {self._path(path)}) END"
        )
        return (
            f'CREATE UNIQUE INDEX IF NOT EXISTS "{index}" ON "{table}" '
            f"(({kind_sql}), {self.extract(path)})"
        )

    def plain_index(self, table: str, index: str, path: tuple[str, ...]) -> str:
        return f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ({self.extract(path)})'


class PostgresDialect(SQLDialect):
    """PostgreSQL's jsonb operators."""

    name = "postgres"
    KINDS = {
        "number": ("number",),
        "string": ("string",),
        "bool": ("boolean",),
        "object": ("object",),
        "array": ("array",),
    }

    def _path(self, path: tuple[str, ...]) -> str:
        return "'{" + ",".join(path) + "}'"

    def value(self, path: tuple[str, ...]) -> str:
        """The jsonb value at `path`."""
        return f"(body #> {self._path(path)})"

    def text(self, path: tuple[str, ...]) -> str:
        """The value at `path` as text."""
        return f"(body #>> {self._path(path)})"

    def type_of(self, path: tuple[str, ...]) -> str:
        return f"COALESCE(jsonb_typeof{self.value(path)}, 'missing')"

    def param_value(self, value: Any) -> Any:
        return value if isinstance(value, str) else orjson.dumps(value).decode()

    def compare(self, path: tuple[str, ...], op: str, value: Any, param: str) -> str | None:
        if isinstance(value, str):
            # Collation "C" compares code points, as Python and SQLite do.
            return f'{self.text(path)} COLLATE "C" {_SQL_OPS[op]} ${param}'
        # jsonb compares numbers numerically (1 = 1.0) and objects regardless of key order.
        return f"{self.value(path)} {_SQL_OPS[op]} CAST(${param} AS jsonb)"

    def order(self, path: tuple[str, ...], direction: str) -> list[str]:
        t = self.type_of(path)
        rank = (
            f"CASE {t} WHEN 'number' THEN 1 WHEN 'string' THEN 2 WHEN 'object' THEN 3 "
            f"WHEN 'array' THEN 4 WHEN 'boolean' THEN 5 ELSE 0 END"
        )
        # Strings by code point; other kinds by jsonb order; missing and null all tie (a bare
        # jsonb term would put SQL NULL, i.e. missing, after JSON null).
        text = f"CASE WHEN {t} = 'string' THEN {self.text(path)} END"
        other = f"CASE WHEN {t} NOT IN ('missing', 'null', 'string') THEN {self.value(path)} END"
        return [f"{rank} {direction}", f'{text} COLLATE "C" {direction}', f"{other} {direction}"]

    def unique_index(self, table: str, index: str, path: tuple[str, ...]) -> str:
        return (
            f'CREATE UNIQUE INDEX IF NOT EXISTS "{index}" ON "{table}" ({self.value(path)}) '
            f"WHERE jsonb_typeof{self.value(path)} <> 'null'"
        )

    def plain_index(self, table: str, index: str, path: tuple[str, ...]) -> str:
        return f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ({self.value(path)})'


def dialect_for(name: str) -> SQLDialect:
    """The dialect for a socketify Database's `dialect`."""
    if name == "sqlite":
        return SQLiteDialect()
    if name == "postgres":
        return PostgresDialect()
    raise ValueError(f"the document store runs on SQLite or PostgreSQL, not {name}")


def order_by(dialect: SQLDialect, keys: list[SortKey]) -> str:
    """The ORDER BY clause: the sort keys, then insertion order."""
    terms = []
    for path, direction in keys:
        terms.extend(dialect.order(path, "ASC" if direction > 0 else "DESC"))
    terms.append("seq ASC")
    return "ORDER BY " + ", ".join(terms)
