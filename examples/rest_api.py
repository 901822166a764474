"""A to-do REST API under `/api`: JSON in and out, with the status codes a client can rely on.

    socketify run examples.rest_api:server --bind 127.0.0.1:8080 --workers 2
    curl -X POST localhost:8080/api/todos -d '{"title": "write docs"}'  # 201 {"id":1,...}
    curl localhost:8080/api/todos                                       # [{"id":1,...}]
    curl -X PATCH localhost:8080/api/todos/1 -d '{"done": true}'        # 200, the todo
    curl -X DELETE localhost:8080/api/todos/1                           # 204, no body
    curl localhost:8080/api/todos/1                 # 404 {"error":"no such todo"}
    curl localhost:8080/api/todos/abc               # 404 as well: never "todo 0"
    curl -X POST localhost:8080/api/todos -d '{"title": 5}'             # 422
    curl -X PATCH localhost:8080/api/todos/1 -d '{oops'                 # 400 invalid JSON

Why SQLite and not a dict behind a mutex: with `--workers 2` every worker is its own process,
so a dict would hold a different list in each, and a todo created through one worker would be
missing from half of the following requests. One SQLite file (`REST_API_DB`, default
`examples/.data/rest_api.db`) is shared by all of them, and each statement below is a whole
operation (`UPDATE ... RETURNING`), so a PATCH racing a DELETE on another worker can never bring the
todo back, which a read-modify-write through a key/value store could.

Ids are checked, not coerced: `/api/todos/abc` is a 404, never todo 0.

Guides: docs/guide/routing.md, docs/guide/request-response.md, docs/guide/validation.md.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from typing import Any

from examples._data import data_path
from socketify import HTTPError, Request, Response, Server

NO_SUCH_TODO = "no such todo"
NEED_TITLE = "body must be JSON with a string 'title'"
BAD_CHANGES = "'title' must be a non-empty string and 'done' a boolean"
MAX_TITLE = 200
_ID = re.compile(r"[1-9][0-9]{0,17}")  # ASCII digits that fit a SQLite integer

_SCHEMA = """
CREATE TABLE IF NOT EXISTS todos (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0
)
"""


class Todos:
    """The todo table in one SQLite file that every worker opens."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._pid = 0

    def _db(self) -> sqlite3.Connection:
        # Opened per process: a connection must not cross the fork into the workers.
        if self._connection is None or self._pid != os.getpid():
            # Autocommit: every statement is its own short transaction, so waiting for another
            # worker's write lock (a wait that blocks this worker's hub) lasts microseconds.
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=2.0)
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
            connection.execute(_SCHEMA)
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    def all(self) -> list[dict[str, Any]]:
        """Every todo, oldest first."""
        rows = self._db().execute("SELECT id, title, done FROM todos ORDER BY id")
        return [_as_json(row) for row in rows]

    def get(self, todo_id: int) -> dict[str, Any] | None:
        """One todo, or None."""
        row = self._db().execute("SELECT id, title, done FROM todos WHERE id = ?", (todo_id,))
        return _as_json_or_none(row.fetchone())

    def add(self, title: str) -> dict[str, Any]:
        """Insert a todo, not done yet; returns it with its new id."""
        row = self._db().execute(
            "INSERT INTO todos (title) VALUES (?) RETURNING id, title, done", (title,)
        )
        return _as_json(row.fetchone())

    def change(self, todo_id: int, title: str | None, done: bool | None) -> dict[str, Any] | None:
        """Set the fields given (None keeps a field); the todo afterwards, or None if absent."""
        row = self._db().execute(
            "UPDATE todos SET title = coalesce(?, title), done = coalesce(?, done) "
            "WHERE id = ? RETURNING id, title, done",
            (title, done, todo_id),
        )
        return _as_json_or_none(row.fetchone())

    def remove(self, todo_id: int) -> bool:
        """Delete a todo; False if there was none."""
        return self._db().execute("DELETE FROM todos WHERE id = ?", (todo_id,)).rowcount > 0


def _as_json(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "title": row["title"], "done": bool(row["done"])}


def _as_json_or_none(row: sqlite3.Row | None) -> dict[str, Any] | None:
    return None if row is None else _as_json(row)


def _valid_title(value: object) -> str | None:
    if isinstance(value, str) and value.strip() and len(value) <= MAX_TITLE:
        return value.strip()
    return None


def _todo_id(req: Request) -> int:
    """The `:id` of the path; anything but a positive decimal number is an unknown todo."""
    raw = req.params["id"]
    if not _ID.fullmatch(raw):
        raise HTTPError(404)  # answered as JSON by `json_errors`
    return int(raw)


todos = Todos(os.environ.get("REST_API_DB") or str(data_path("rest_api.db")))
server = Server()
api = server.group("/api")


def json_errors(req: Request, res: Response, next: Callable[[], None]) -> None:
    """Group middleware: the API answers errors as `{"error": ...}`, never as plain text."""
    try:
        next()
    except HTTPError as exc:
        if exc.status == 404:
            res.json_error(404, NO_SUCH_TODO)
        elif exc.status == 400:
            res.json_error(400, "invalid JSON")
        else:
            raise


api.use(json_errors)


@api.get("/todos")
def list_todos(req: Request, res: Response) -> None:
    res.json(todos.all())


@api.post("/todos")
def create_todo(req: Request, res: Response) -> None:
    try:
        body = req.json()
    except HTTPError:
        body = None  # anything but a JSON object with a string title is a 422
    title = _valid_title(body.get("title")) if isinstance(body, dict) else None
    if title is None:
        res.json_error(422, NEED_TITLE)
        return
    res.status(201).json(todos.add(title))


@api.get("/todos/:id")
def show_todo(req: Request, res: Response) -> None:
    todo = todos.get(_todo_id(req))
    if todo is None:
        raise HTTPError(404)
    res.json(todo)


@api.patch("/todos/:id")
def update_todo(req: Request, res: Response) -> None:
    todo_id = _todo_id(req)
    body = req.json()  # invalid JSON: HTTPError(400), answered by json_errors
    if not isinstance(body, dict):
        res.json_error(422, BAD_CHANGES)
        return
    title = body.get("title")
    done = body.get("done")
    if ("title" in body and _valid_title(title) is None) or (
        "done" in body and not isinstance(done, bool)
    ):
        res.json_error(422, BAD_CHANGES)
        return
    todo = todos.change(todo_id, _valid_title(title), done)
    if todo is None:
        raise HTTPError(404)
    res.json(todo)


@api.delete("/todos/:id")
def delete_todo(req: Request, res: Response) -> None:
    if not todos.remove(_todo_id(req)):
        raise HTTPError(404)
    res.send_status(204)  # no body and no Content-Length (RFC 9110 §8.6)


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
