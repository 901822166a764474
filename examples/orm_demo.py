"""socketify.db in one file: models with validations, hooks and relations, a migration written
in code, explicit transactions (one committed, one rolled back), and an indexed document.

    python -m examples.orm_demo                     # prints what it did, serves :8090 ($PORT)
    socketify run examples.orm_demo:server --bind 127.0.0.1:8090 [--workers 2 --preload]
    curl localhost:8090/                            # {"users": 2, "posts": 3, "flags": [...], ...}
    curl localhost:8090/users                       # every user with the titles of their posts
    curl -X POST localhost:8090/users -d '{"name": "linus", "email": "l@example.com",
                                           "first_post": "hello"}'          # 201, one transaction
    curl -X POST localhost:8090/users -d '{"name": "x", "email": "nope"}'   # 422, nothing kept
    curl -X POST localhost:8090/notes -d '{"tag": "todo", "text": "write docs"}'
    curl 'localhost:8090/notes?tag=todo'
    socketify db status --app examples.orm_demo     # applied  20260720  seed_flag  <when>

DATABASE_URL picks the database (default: `orm_demo.db` in `examples/.data/`). The
set-up below runs when the module is imported, so each worker would run it: with several
workers, `--preload` runs it once in the master. Every step is idempotent, so starting the
demo again finds the same rows. The notes are documents in the same database, so every
worker answers `/notes` alike.

Guide: docs/guide/database.md.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pony.orm import Required, Set, commit, db_session

import socketify.db
from examples._data import sqlite_url
from socketify import Request, Response, Server
from socketify.db import documents
from socketify.db.database import MIGRATING_ENV
from socketify.db.migrations import Migrator

EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")

db = socketify.db.connect(os.environ.get("DATABASE_URL") or sqlite_url("orm_demo.db"), pool_size=4)


class User(db.Entity):
    name = Required(str, max_len=80, py_check=lambda name: name.strip() != "")
    email = Required(str, max_len=200, unique=True, py_check=EMAIL.fullmatch)
    posts = Set("Post", cascade_delete=True)  # deleting a user deletes their posts

    def before_insert(self) -> None:
        self.name = _capitalised(self.name)

    def before_update(self) -> None:
        self.name = _capitalised(self.name)

    def as_json(self) -> dict[str, Any]:
        titles = [post.title for post in self.posts.order_by(Post.id)]
        return {"id": self.id, "name": self.name, "email": self.email, "posts": titles}


class Post(db.Entity):
    title = Required(str, max_len=200)
    author = Required(User, index=True)


def _capitalised(name: str) -> str:
    name = name.strip()
    return name[:1].upper() + name[1:]


db.generate_mapping(create_tables=True)


# -- a migration registered in code -----------------------------------------------------------


def add_flags(db: Any) -> None:
    """Create the feature-flag table and turn the first flag on."""
    db.execute("CREATE TABLE flags (name VARCHAR(40) PRIMARY KEY, enabled BOOLEAN NOT NULL)")
    db.execute("INSERT INTO flags (name, enabled) VALUES ('seeded', 1)")


def drop_flags(db: Any) -> None:
    """Undo add_flags."""
    db.execute("DROP TABLE flags")


migrator = Migrator(db)
migrator.register(20260720, "seed_flag", add_flags, drop_flags)


# -- explicit transactions --------------------------------------------------------------------


def create_user(name: str, email: str, titles: list[str]) -> User:
    """A user and their posts, written together by the caller's transaction."""
    user = User(name=name, email=email.strip().lower())
    for title in titles:
        Post(title=title, author=user)
    return user


def seed() -> str:
    """Ada and Grace with their posts, one transaction each, then a transaction that fails and
    is rolled back whole; returns the name of the error that rolled it back."""
    with db_session:  # one transaction: Ada and her two posts are committed together, or none
        if not User.exists(email="ada@example.com"):
            create_user("ada", "ada@example.com", ["Notes on the engine", "On the loom"])
    with db_session:
        if not User.exists(email="grace@example.com"):
            create_user("grace", "grace@example.com", ["Compilers"])
    try:
        with db_session:  # the second user takes the same email: the first is undone with it
            create_user("alan", "alan@example.com", [])
            create_user("alan again", "alan@example.com", [])
            commit()
    except Exception as exc:  # shown, not hidden: what the rollback left
        return type(exc).__name__
    return ""


# `socketify db migrate|status|rollback --app examples.orm_demo` imports this module to find
# `db` and `migrator`, and leaves the tables to the command: the demo's own set-up waits for
# a real start.
if os.environ.get(MIGRATING_ENV) != "1":
    applied = [migration.label for migration in migrator.migrate()]
    rolled_back = seed()
else:
    applied, rolled_back = [], ""

# -- documents beside the tables, with an index -------------------------------------------------

# The notes live in the same database as the tables, so every worker sees the same ones.
notes = documents.open(db)["notes"]
notes.create_index("tag")
WELCOME = {"tag": "welcome", "text": "documents sit beside the tables"}
first_note = (notes.find({"tag": "welcome"}, sort="_id", limit=1) or [notes.insert(WELCOME)])[0]


# -- HTTP ---------------------------------------------------------------------------------------

server = Server()
server.use(socketify.db.middleware(db))  # a db_session per request; Pony errors -> 404/409/422


def counts() -> dict[str, Any]:
    """Rows and documents the demo holds now."""
    flags = db.select("SELECT name, enabled FROM flags ORDER BY name")
    return {
        "users": User.select().count(),
        "posts": Post.select().count(),
        "flags": [{"name": name, "enabled": bool(enabled)} for name, enabled in flags],
        "note": first_note["_id"],
        "notes": notes.count(),
    }


@server.get("/")
def overview(req: Request, res: Response) -> None:
    res.json(counts())


@server.get("/users")
def list_users(req: Request, res: Response) -> None:
    res.json([user.as_json() for user in User.select().order_by(User.id)])


@server.get("/users/:id")
def get_user(req: Request, res: Response) -> None:
    user_id = req.params["id"]
    if not user_id.isdigit():
        res.status(404).json({"error": "not found"})
        return
    res.json(User[int(user_id)].as_json())  # a missing user is ObjectNotFound: a 404 too


@server.post("/users")
def add_user(req: Request, res: Response) -> None:
    body = req.json()
    if not isinstance(body, dict):
        res.status(400).json({"error": "the body must be a JSON object"})
        return
    first_post = body.get("first_post")
    titles = [first_post] if isinstance(first_post, str) and first_post.strip() else []
    # The request's transaction: a bad email or a taken one keeps neither user nor post.
    user = create_user(str(body.get("name", "")), str(body.get("email", "")), titles)
    user.flush()
    res.status(201).json(user.as_json())


@server.get("/notes")
def find_notes(req: Request, res: Response) -> None:
    tag = req.query.get("tag")
    res.json(notes.find({"tag": tag} if tag else None, sort="_id"))


@server.post("/notes")
def add_note(req: Request, res: Response) -> None:
    body = req.json()
    tag, text = (body.get("tag"), body.get("text")) if isinstance(body, dict) else (None, None)
    if not (isinstance(tag, str) and tag and isinstance(text, str) and text):
        res.status(422).json({"error": "a note needs a string 'tag' and a string 'text'"})
        return
    res.status(201).json(notes.insert({"tag": tag, "text": text}))


def report() -> str:
    """What the set-up did, for the console."""
    with db_session:
        now = counts()
        ada = User.get(email="ada@example.com")
        relation = f"{ada.name}: {', '.join(p.title for p in ada.posts.order_by(Post.id))}"
        alan_kept = User.exists(email="alan@example.com")
    return "\n".join(
        [
            f"migrations applied now: {', '.join(applied) or 'none (already applied)'}",
            f"relation (user has_many posts) -> {relation}",
            f"rolled back: {rolled_back or 'nothing'}; alan kept: {alan_kept}",
            f"counts -> users={now['users']} posts={now['posts']} flags={now['flags']}",
            f"note id={first_note['_id']} (tag index on notes)",
        ]
    )


if __name__ == "__main__":
    print(report())
    server.listen(int(os.environ.get("PORT", "8090")), host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
