"""Entities the database tests declare on each fresh Database: relations, hooks, checks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pony.orm import Optional, Required, Set


def define(db: Any, *, create_tables: bool = True) -> SimpleNamespace:
    """Declare User and Todo on `db`, map them, and return them with a hook event log."""
    events: list[tuple[str, str]] = []

    class User(db.Entity):  # type: ignore[name-defined,misc]
        name = Required(str, max_len=40)
        email = Required(str, unique=True)
        age = Optional(int, min=0, max=150)
        todos = Set("Todo")

        def before_insert(self) -> None:
            self.email = self.email.lower()  # hooks may normalise before the INSERT

    class Todo(db.Entity):  # type: ignore[name-defined,misc]
        title = Required(str, py_check=lambda title: title.strip() != "")
        done = Required(bool, default=False)
        owner = Required(User)
        revision = Required(int, default=1)

        def before_update(self) -> None:
            self.revision += 1

        def after_insert(self) -> None:
            events.append(("after_insert", self.title))

        def after_update(self) -> None:
            events.append(("after_update", self.title))

    db.generate_mapping(create_tables=create_tables)
    return SimpleNamespace(User=User, Todo=Todo, events=events)
