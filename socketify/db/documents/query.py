"""The query language every document engine shares: filters, sorts, paths, value order.

A filter maps dotted field paths to a value (equality) or to operators:

    {"status": "open", "views": {"$gte": 10, "$lt": 100}, "tags": {"$exists": True}}

Operators: $eq $ne $gt $gte $lt $lte $in $nin $exists; several on one field all must hold.
The semantics follow MongoDB's for scalars: `None` matches a missing field too; `$ne` and
`$nin` match documents without the field; `$gt`-style comparisons only match values of the
same kind (numbers with numbers, strings with strings; booleans are not numbers). An empty
`$in` matches nothing and an empty `$nin` everything. Values sort as missing/null < numbers <
strings < objects < arrays < booleans, ties in insertion order.
The memory engine evaluates this module directly; the SQL engines compile it to SQL and
are tested to agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from socketify.db.documents.errors import InvalidQuery

__all__ = [
    "MISSING",
    "OPERATORS",
    "Condition",
    "SortKey",
    "apply_changes",
    "index_key",
    "kind",
    "lookup",
    "matches",
    "parse_changes",
    "parse_filter",
    "parse_path",
    "parse_sort",
    "sort_documents",
]

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"})
_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RANK = {"missing": 0, "null": 0, "number": 1, "string": 2, "object": 3, "array": 4, "bool": 5}


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Condition:
    """One test: the value at `path` satisfies `op` against `value`."""

    path: tuple[str, ...]
    op: str
    value: Any

    @property
    def field(self) -> str:
        """The dotted path."""
        return ".".join(self.path)


SortKey = tuple[tuple[str, ...], int]  # (path, 1 ascending | -1 descending)


def parse_path(field: str) -> tuple[str, ...]:
    """`"a.b"` -> `("a", "b")`; segments are letters, digits, `_` and `-`."""
    if not isinstance(field, str):
        raise InvalidQuery(f"field names are strings, not {type(field).__name__}")
    parts = tuple(field.split("."))
    if not all(_SEGMENT.fullmatch(part) for part in parts):
        raise InvalidQuery(f"invalid field path {field!r}: use letters, digits, _ and - ")
    return parts


def parse_filter(filter: Mapping[str, Any] | None) -> list[Condition]:
    """Validate a filter and flatten it into conditions (all must hold)."""
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidQuery(f"a filter is a dict, not {type(filter).__name__}")
    conditions = []
    for field, spec in filter.items():
        if isinstance(field, str) and field.startswith("$"):
            raise InvalidQuery(f"unsupported top-level operator {field}")
        path = parse_path(field)
        if isinstance(spec, Mapping) and any(str(key).startswith("$") for key in spec):
            if not all(str(key).startswith("$") for key in spec):
                raise InvalidQuery(f"{field}: do not mix operators and fields")
            for op, value in spec.items():
                conditions.append(_condition(path, op, value))
        else:
            conditions.append(_condition(path, "$eq", spec))
    return conditions


def _condition(path: tuple[str, ...], op: str, value: Any) -> Condition:
    name = ".".join(path)
    if op not in OPERATORS:
        raise InvalidQuery(f"{name}: unsupported operator {op}")
    if op in ("$in", "$nin"):
        if not isinstance(value, list | tuple):
            raise InvalidQuery(f"{name}: {op} takes a list")
        value = [_json_value(name, item) for item in value]
    elif op == "$exists":
        if not isinstance(value, bool):
            raise InvalidQuery(f"{name}: $exists takes true or false")
    elif op in ("$gt", "$gte", "$lt", "$lte"):
        if kind(value) not in ("number", "string"):
            raise InvalidQuery(f"{name}: {op} compares numbers or strings")
    else:
        value = _json_value(name, value)
    return Condition(path, op, value)


def _json_value(name: str, value: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InvalidQuery(f"{name}: {value!r} is not a JSON value") from exc


def parse_sort(sort: str | Iterable[Any] | None) -> list[SortKey]:
    """`"age"`, `"-age"`, or `[("age", -1), ("name", 1)]` -> [(path, direction)]."""
    if sort is None:
        return []
    if isinstance(sort, str):
        sort = [(sort[1:], -1) if sort.startswith("-") else (sort, 1)]
    keys = []
    for item in sort:
        if isinstance(item, str):
            item = (item[1:], -1) if item.startswith("-") else (item, 1)
        if not isinstance(item, tuple | list) or len(item) != 2 or item[1] not in (1, -1):
            raise InvalidQuery(f"sort entries are (field, 1 or -1), not {item!r}")
        keys.append((parse_path(item[0]), int(item[1])))
    return keys


def parse_changes(changes: Mapping[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    """Validate `update` changes: dotted paths to JSON values; `_id` cannot change."""
    if not isinstance(changes, Mapping) or not changes:
        raise InvalidQuery("update takes a non-empty dict of field -> new value")
    parsed = []
    for field, value in changes.items():
        path = parse_path(field)
        if path[0] == "_id":
            raise InvalidQuery("a document's _id cannot change")
        parsed.append((path, _json_value(field, value)))
    return parsed


# -- evaluation ---------------------------------------------------------------------------------


def kind(value: Any) -> str:
    """The JSON kind of a value: missing null bool number string object array."""
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    raise InvalidQuery(f"{value!r} is not a JSON value")


def lookup(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path`, or MISSING."""
    value: Any = doc
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def _equal(found: Any, wanted: Any) -> bool:
    if wanted is None:
        return found is MISSING or found is None
    return kind(found) == kind(wanted) and found == wanted


def _holds(found: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return _equal(found, wanted)
    if op == "$ne":
        return not _equal(found, wanted)
    if op == "$in":
        return any(_equal(found, item) for item in wanted)
    if op == "$nin":
        return not any(_equal(found, item) for item in wanted)
    if op == "$exists":
        return (found is not MISSING) is wanted
    if kind(found) != kind(wanted):
        return False
    if op == "$gt":
        return bool(found > wanted)
    if op == "$gte":
        return bool(found >= wanted)
    if op == "$lt":
        return bool(found < wanted)
    return bool(found <= wanted)  # $lte


def matches(doc: Mapping[str, Any], conditions: list[Condition]) -> bool:
    """Whether `doc` satisfies every condition."""
    return all(_holds(lookup(doc, c.path), c.op, c.value) for c in conditions)


def _order(value: Any) -> tuple[int, Any]:
    rank = _RANK[kind(value)]
    if rank == 0:
        return (0, 0)
    if rank in (3, 4):  # objects and arrays: some fixed order, compared as canonical JSON
        return (rank, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    return (rank, value)


def sort_documents(docs: list[dict[str, Any]], keys: list[SortKey]) -> list[dict[str, Any]]:
    """Sort stably by `keys` (so ties keep their insertion order)."""
    result = list(docs)
    for path, direction in reversed(keys):
        result.sort(key=lambda doc: _order(lookup(doc, path)), reverse=direction < 0)
    return result


def index_key(value: Any) -> Any:
    """The key a unique index stores for `value`; None when the value is not indexed."""
    found = kind(value)
    if found in ("missing", "null"):
        return None  # like a SQL unique index: any number of documents may lack the field
    if found in ("object", "array"):
        return (found, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    return (found, value)  # numbers compare by value: 1 and 1.0 collide, True and 1 do not


def apply_changes(
    doc: Mapping[str, Any], changes: list[tuple[tuple[str, ...], Any]]
) -> dict[str, Any]:
    """A copy of `doc` with each path set (missing or non-object parents become objects)."""
    new: dict[str, Any] = orjson.loads(orjson.dumps(doc))
    for path, value in changes:
        target = new
        for part in path[:-1]:
            child = target.get(part)
            if not isinstance(child, dict):
                child = target[part] = {}
            target = child
        target[path[-1]] = value
    return new
