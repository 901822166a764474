"""What a Pony converter does to a value, decided once per attribute rather than per row.

Pony converts every value it reads with its attribute's converter (`sql2py`, then
`dbval2val`), most of which are Pony's identity methods; the compiled readers
(`fastpath.loader`, `fastpath.rows`) call only the steps that do something.
"""

from __future__ import annotations

from typing import Any

from pony.orm.dbapiprovider import Converter, IntConverter

__all__ = ["overrides", "sql2py_of"]


def overrides(converter: Any, name: str) -> bool:
    """Whether the converter's class replaces Pony's identity `Converter.<name>`."""
    return getattr(type(converter), name) is not getattr(Converter, name)


def sql2py_of(converter: Any) -> Any:
    """What turns the driver's value into the attribute's, when not the identity: the
    converter's `sql2py`, or the builtin `int` for Pony's integer one (which calls just that,
    PERF: without a Python frame)."""
    if not overrides(converter, "sql2py"):
        return None
    if type(converter).sql2py is IntConverter.sql2py:
        return int
    return converter.sql2py
