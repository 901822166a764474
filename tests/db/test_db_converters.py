"""The converter steps a compiled reader keeps are exactly those that change a value."""

from __future__ import annotations

from typing import Any

import pytest
from pony.orm import Json, Optional, Required, db_session

import socketify.db
from socketify.db.fastpath.converters import overrides, sql2py_of

pytestmark = [pytest.mark.usefixtures("fast_path"), pytest.mark.fast_path_only]


@pytest.fixture
def entity(sqlite_url: str) -> Any:
    db = socketify.db.connect(sqlite_url)

    class Row(db.Entity):  # type: ignore[name-defined,misc]
        count = Required(int)
        label = Required(str)
        ratio = Optional(float)
        extra = Optional(Json)

    db.generate_mapping(create_tables=True)
    yield Row
    db.disconnect()


def test_ponys_integer_conversion_becomes_the_builtin_int(entity: Any) -> None:
    converter = entity.count.converters[0]
    assert overrides(converter, "sql2py")
    assert sql2py_of(converter) is int
    for raw in (7, True, 7.0, "7"):
        assert int(raw) == converter.sql2py(raw)


def test_an_identity_conversion_is_left_out_and_others_kept(entity: Any) -> None:
    assert sql2py_of(entity.label.converters[0]) is None
    for attr in (entity.ratio, entity.extra):
        converter = attr.converters[0]
        expected = converter.sql2py if overrides(converter, "sql2py") else None
        assert sql2py_of(converter) == expected


def test_rows_read_through_the_kept_steps_equal_ponys(entity: Any) -> None:
    with db_session:
        entity(id=1, count=3, label="x", ratio=0.5, extra={"a": [1]})
    with db_session:
        assert socketify.db.get_row(entity, 1) == entity[1].to_dict()
