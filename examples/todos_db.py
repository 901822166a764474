"""A to-do API on Pony ORM through socketify.db: relations, validations, hooks, transactions,
errors as HTTP, and a document collection for the activity feed.

    socketify run examples.todos_db:server --bind 127.0.0.1:8080 --workers 2
    curl -X POST localhost:8080/users -d '{"name": "Ann", "email": "Ann@Example.com"}'
    curl -X POST localhost:8080/users/1/todos -d '{"title": "write docs"}'
    curl -X PATCH localhost:8080/todos/1 -d '{"done": true}'
    curl localhost:8080/users/1        # {"id":1,"name":"Ann",...,"todos":[...]}
    curl localhost:8080/users/99       # 404 {"error":"not found"}
    curl -X POST localhost:8080/users -d '{"name": "Bob", "email": "ann@example.com"}'   # 409
    curl -X POST localhost:8080/users/1/todos -d '{"title": "  "}'                       # 422

DATABASE_URL picks the database (default: `todos.db` in `examples/.data/`; postgres://... and mysql://...
work the same). Each worker keeps at most 8 connections. For a schema that evolves, replace
`create_tables=True` with migrations: `socketify db new create_todos --app examples.todos_db`.

Guide: docs/guide/database.md.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from pony.orm import Optional, Required, Set

import socketify.db
from examples._data import sqlite_url
from socketify import Request, Response, Server
from socketify.db import documents

db = socketify.db.connect(os.environ.get("DATABASE_URL") or sqlite_url("todos.db"), pool_size=8)


class User(db.Entity):
    name = Required(str, max_len=80)
    email = Required(str, max_len=200, unique=True)
    todos = Set("Todo")

    def before_insert(self) -> None:
        self.email = self.email.strip().lower()  # a hook: normalise before the INSERT


class Todo(db.Entity):
    title = Required(str, max_len=200, py_check=lambda title: title.strip() != "")
    done = Required(bool, default=False)
    priority = Required(int, default=2, min=1, max=5)
    owner = Required(User)
    updated_at = Optional(datetime)

    def before_update(self) -> None:
        self.updated_at = datetime.now(UTC).replace(tzinfo=None)

    def as_json(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "done": self.done, "priority": self.priority}


db.generate_mapping(create_tables=True)
# Documents in the same database: written in the request's transaction, so an activity entry
# exists exactly when the change it describes was committed.
activity = documents.open(db)["activity"]

server = Server()
server.use(socketify.db.middleware(db))  # db_session per request; Pony errors -> 404/409/422/503


def log(event: str, **details: object) -> None:
    activity.insert({"event": event, "at": datetime.now(UTC).isoformat(), **details})


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")


@server.post("/users")
def create_user(req: Request, res: Response) -> None:
    body = req.json()
    user = User(name=body.get("name"), email=body.get("email", ""))
    user.flush()  # INSERT now: the id is known, and a duplicate email is a 409 right here
    log("user created", user=user.id)
    res.status(201).json({"id": user.id, "email": user.email})


@server.get("/users/:id")
def get_user(req: Request, res: Response) -> None:
    user = User[int(req.params["id"])]  # a missing user is ObjectNotFound -> 404
    todos = [todo.as_json() for todo in user.todos.order_by(Todo.id)]
    res.json({"id": user.id, "name": user.name, "email": user.email, "todos": todos})


@server.post("/users/:id/todos")
def add_todo(req: Request, res: Response) -> None:
    body = req.json()
    todo = Todo(owner=User[int(req.params["id"])], title=body.get("title", ""),
                priority=body.get("priority", 2))  # fmt: skip
    todo.flush()
    log("todo added", todo=todo.id, user=todo.owner.id)
    res.status(201).json(todo.as_json())


@server.patch("/todos/:id")
def update_todo(req: Request, res: Response) -> None:
    todo = Todo[int(req.params["id"])]
    changes = {k: v for k, v in req.json().items() if k in ("title", "done", "priority")}
    todo.set(**changes)
    log("todo updated", todo=todo.id, fields=sorted(changes))
    res.json(todo.as_json())


@server.delete("/todos/:id")
def delete_todo(req: Request, res: Response) -> None:
    Todo[int(req.params["id"])].delete()
    log("todo deleted", todo=int(req.params["id"]))
    res.send_status(204)


@server.get("/todos")
def list_todos(req: Request, res: Response) -> None:
    query = Todo.select().order_by(Todo.priority, Todo.id)
    if "done" in req.query:
        wanted = req.query["done"] == "true"
        query = query.filter(lambda t: t.done == wanted)
    res.json([todo.as_json() for todo in query])


@server.get("/activity")
def recent_activity(req: Request, res: Response) -> None:
    limit = min(int(req.query.get("limit", "20")), 100)
    res.json(activity.find(sort=[("at", -1)], limit=limit))


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
