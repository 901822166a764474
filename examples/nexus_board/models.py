"""The board's tables on Pony ORM: users, projects with their members, tasks, comments.

Guide: docs/guide/database.md.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from pony.orm import Optional, Required, Set

import socketify.db
from examples._data import sqlite_url

__all__ = ["STATUSES", "Comment", "Project", "Task", "User", "db", "now", "stamp"]

STATUSES = ("todo", "doing", "done")

db = socketify.db.connect(os.environ.get("NEXUS_DB") or sqlite_url("nexus.db"), pool_size=8)


def now() -> datetime:
    """The current UTC time, naive (as every database stores it alike)."""
    return datetime.now(UTC).replace(tzinfo=None)


def stamp(moment: datetime) -> str:
    """A stored time as ISO 8601 in UTC, as the API answers it."""
    return moment.isoformat() + "Z"


class User(db.Entity):
    email = Required(str, max_len=200, unique=True)
    name = Required(str, max_len=60)
    password_hash = Required(str, max_len=200)
    bio = Optional(str, max_len=300)
    avatar = Optional(str, max_len=100)  # the file name under the uploads folder
    created_at = Required(datetime, default=now)
    owned = Set("Project", reverse="owner")
    projects = Set("Project", reverse="members")
    tasks = Set("Task")
    comments = Set("Comment")

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "email": self.email,
            "name": self.name,
            "bio": self.bio or "",
            "avatar_url": f"/uploads/{self.avatar}" if self.avatar else None,
        }

    def brief(self) -> dict[str, object]:
        """What other members see: no email."""
        return {"id": self.id, "name": self.name}


class Project(db.Entity):
    name = Required(str, max_len=80)
    description = Optional(str, max_len=500)
    owner = Required(User, reverse="owned")
    members = Set(User, reverse="projects")
    tasks = Set("Task", cascade_delete=True)
    created_at = Required(datetime, default=now)

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description or "",
            "owner": self.owner.brief(),
            "members": [member.brief() for member in self.members.order_by(User.id)],
            "created_at": stamp(self.created_at),
        }


class Task(db.Entity):
    project = Required(Project)
    title = Required(str, max_len=200)
    description = Optional(str, max_len=2000)
    status = Required(str, max_len=10, default="todo", py_check=lambda s: s in STATUSES)
    created_by = Required(User)
    created_at = Required(datetime, default=now)
    updated_at = Required(datetime, default=now)
    comments = Set("Comment", cascade_delete=True)

    def before_update(self) -> None:
        self.updated_at = now()

    def as_json(self, comments: int | None = None) -> dict[str, object]:
        """The task; `comments` is its comment count when the caller counted them in bulk."""
        return {
            "id": self.id,
            "project_id": self.project.id,
            "title": self.title,
            "description": self.description or "",
            "status": self.status,
            "created_by": self.created_by.brief(),
            "comments": self.comments.count() if comments is None else comments,
            "updated_at": stamp(self.updated_at),
        }


class Comment(db.Entity):
    task = Required(Task)
    author = Required(User)
    body = Required(str, max_len=2000)
    created_at = Required(datetime, default=now)

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "task_id": self.task.id,
            "author": self.author.brief(),
            "body": self.body,
            "created_at": stamp(self.created_at),
        }


db.generate_mapping(create_tables=True)
