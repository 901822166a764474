"""JSON helpers: forgiving parsing and typed access by dotted path.

A handler usually wants "the integer at `user.age`, or 0" without a ladder of `isinstance`
checks. `find(doc, "items.0.id")` walks the document: each dot-separated segment is a key of
an object, or, on an array, an all-digit segment is an index. `get`/`get_or`/`require` then
convert what was found, strictly but for one case: a float asked for as `int` is truncated;
anything else of the wrong kind (a string asked for as an `int`, a boolean asked for as a
number) is a mismatch.

`parse(text)` never raises: empty or invalid text gives None. Note that the JSON text `null`
also parses to None; use `parse_or(text, fallback)` to tell the two apart.
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

import orjson

__all__ = ["Error", "find", "get", "get_or", "has", "parse", "parse_or", "require"]

T = TypeVar("T")

_MISSING: Any = object()


class Error(ValueError):
    """Raised by `require()`: the field at `.path` is missing, null, or of the wrong type."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class _Mismatch(Exception):
    """Internal: the value exists but is not convertible to the asked type."""


def parse(text: str | bytes | bytearray | memoryview | None) -> Any:
    """Parse JSON text; empty or invalid text gives None (so does the document `null`)."""
    return parse_or(text, None)


def parse_or(text: str | bytes | bytearray | memoryview | None, fallback: Any) -> Any:
    """Parse JSON text, returning `fallback` when it is empty or invalid."""
    if not text:
        return fallback
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return fallback


def find(root: Any, path: str, default: Any = None) -> Any:
    """Return the value at dotted `path` ("" is `root`), or `default` when it does not exist.

    An empty segment (`a..b`), a missing key, an out-of-range index, or a segment that cannot
    apply (a key on an array, anything on a scalar) all mean "does not exist".
    """
    if not path:
        return root
    current = root
    for segment in path.split("."):
        if not segment:
            return default
        if isinstance(current, dict):
            # An object is indexed by key even when the segment is numeric ("0" is a key).
            if segment not in current:
                return default
            current = current[segment]
        elif isinstance(current, list) and segment.isascii() and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return default
            current = current[index]
        else:
            return default
    return current


def has(root: Any, path: str) -> bool:
    """True only when `path` exists and its value is not null."""
    return find(root, path) is not None


def _convert(value: Any, kind: type[T]) -> T:
    """Convert a JSON value to `kind`; `_Mismatch` when it is not convertible."""
    if kind is object:
        return value
    # bool is a subclass of int in Python, but a JSON boolean is not a number.
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        if is_number:
            return int(value)  # type: ignore[return-value]  # floats truncate toward zero
    elif kind is float:
        if is_number:
            return float(value)  # type: ignore[return-value]
    elif kind is bool:
        if isinstance(value, bool):
            return value  # type: ignore[return-value]
    elif kind in (str, list, dict):
        if isinstance(value, kind):
            return value
    else:
        raise TypeError(
            f"json_util cannot convert to {kind.__name__}; use int, float, str, "
            "bool, list, dict or object"
        )
    raise _Mismatch


@overload
def get(root: Any, path: str) -> Any: ...
@overload
def get(root: Any, path: str, kind: type[T]) -> T | None: ...
def get(root: Any, path: str, kind: type[Any] = object) -> Any:
    """Return the value at `path` converted to `kind`; None if missing, null or unconvertible."""
    value = find(root, path)
    if value is None:
        return None
    try:
        return _convert(value, kind)
    except _Mismatch:
        return None


def get_or(root: Any, path: str, fallback: T, kind: type[T] | None = None) -> T:
    """Return `get(root, path, kind)`, or `fallback` when that is None.

    `kind` defaults to the type of `fallback`, so `get_or(doc, "page", 1)` reads an int.
    """
    if kind is None:
        kind = object if fallback is None else type(fallback)  # type: ignore[assignment]
    value = get(root, path, kind)  # type: ignore[arg-type]
    return fallback if value is None else value


@overload
def require(root: Any, path: str) -> Any: ...
@overload
def require(root: Any, path: str, kind: type[T]) -> T: ...
def require(root: Any, path: str, kind: type[Any] = object) -> Any:
    """Return the value at `path` converted to `kind`, or raise `Error` naming the path."""
    value = find(root, path)
    if value is None:
        raise Error(path, f"missing required field '{path}'")
    try:
        return _convert(value, kind)
    except _Mismatch:
        raise Error(path, f"field '{path}' has the wrong type") from None
