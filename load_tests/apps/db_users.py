"""The database bar's app: `DB_URL=... socketify run load_tests.apps.db_users:server`.

`/ping` is the same answer as `ping.py` and touches no database; `/users/:id` runs, through
`socketify.db.middleware(db)`, one `db_session` with one primary-key select (`User[id]`) and
answers the user as JSON. `/users/:id/row` is the same read through `socketify.db.get_row`
(the row as a dict, no entity object): the documented read-only fast path. All live in one
server so they are measured in the same run.
`DB_URL` picks the database (`sqlite:////tmp/x.db`, `postgres://...?schema=...`), `POOL_SIZE`
the pool (default 8). The table is created and user 1 inserted at import, in every process
that imports the app, so the first request already finds them.
"""

import os

from pony.orm import Required, db_session

import socketify.db
from socketify import Server

db = socketify.db.connect(os.environ["DB_URL"], pool_size=int(os.environ.get("POOL_SIZE", "8")))


class User(db.Entity):
    name = Required(str, max_len=80)
    email = Required(str, max_len=120)


db.generate_mapping(create_tables=True)
with db_session:
    if User.get(id=1) is None:
        User(id=1, name="Ann", email="ann@example.com")

server = Server(compression=False)


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def get_user(req, res):
    user = User[int(req.params["id"])]
    res.json({"id": user.id, "name": user.name, "email": user.email})


server.get("/users/:id", get_user).use(socketify.db.middleware(db))


def get_user_row(req, res):
    res.json(socketify.db.get_row(User, int(req.params["id"])))


server.get("/users/:id/row", get_user_row).use(socketify.db.middleware(db))
