"""Ours: `socketify run load_tests.tfb.app:server` serves the six TechEmpower test types.

At TechEmpower's paths (`/json`, `/db`, `/queries?queries=`, `/fortunes`,
`/updates?queries=`, `/plaintext`) the database tests use Pony entities through
`socketify.db`, as an application would: `World[id]` for the single read, and where building
one entity per row is the cost, socketify.db's helpers on the entities' mapping:
`get_columns(World, ids, ...)` for the multiple reads (one SELECT per id, pipelined: one round
trip with psycopg 3), `select_columns(Fortune, ...)` for the read-only fortunes page and
`update_rows(World, ...)` for the batch of new numbers, one UPDATE in the request's
`db_session`. Under `/raw/...` the same four tests use `db.statement(...)`: raw SQL prepared
once per pooled connection, rows as tuples, `one_each` for the multiple reads.

The fortunes page is `templates/fortunes.html`, rendered by `res.render` (Jinja2,
autoescaped). The tables are `python -m load_tests.tfb setup`'s, on $TFB_DATABASE_URL; each
worker holds at most `TFB_POOL_SIZE` (8) connections.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from pony.orm import PrimaryKey, Required

import socketify.db
from load_tests.tfb.spec import (
    ADDITIONAL_FORTUNE,
    HELLO,
    MESSAGE,
    POOL_SIZE,
    TEMPLATES,
    database_url,
    queries_count,
    random_id,
    random_ids,
    random_number,
)
from socketify import Server

_url, _schema = database_url()
db = socketify.db.connect(
    f"{_url}{'&' if '?' in _url else '?'}schema={_schema}", pool_size=POOL_SIZE
)


class World(db.Entity):
    """A row of `world`: 10,000 of them, each with a number in 1-10,000."""

    _table_ = "world"
    id = PrimaryKey(int)
    # Concurrent requests update the same rows: the last write wins, as TechEmpower expects,
    # rather than Pony's optimistic check failing the later transaction.
    randomNumber = Required(int, column="randomnumber", optimistic=False)


class Fortune(db.Entity):
    """A row of `fortune`."""

    _table_ = "fortune"
    id = PrimaryKey(int)
    message = Required(str, max_len=2048)


db.generate_mapping()

by_message = itemgetter(1)

server = Server(compression=False, templates=TEMPLATES)


@server.get("/json")
def json(req, res):
    res.json({"message": MESSAGE})


@server.get("/plaintext")
def plaintext(req, res):
    res.send(HELLO, "text/plain")


# -- Pony entities --------------------------------------------------------------------------------

# The db_session of the four database tests is their routes' own middleware: a group of
# prefix "" would hold every route, and /json and /plaintext have no database work to wrap.
db_session = socketify.db.middleware(db)


def single_query(req, res):
    world = World[random_id()]
    res.json({"id": world.id, "randomNumber": world.randomNumber})


def queries(req, res):
    # One SELECT per id, sent together in one round trip (pipeline mode, with psycopg 3).
    ids = random_ids(queries_count(req.query.get("queries")))
    rows = socketify.db.get_columns(World, ids, "id", "randomNumber")
    res.json([{"id": world_id, "randomNumber": number} for world_id, number in rows])


def fortunes(req, res):
    # A read-only page: tuples of the two columns, no entity object per row.
    rows = socketify.db.select_columns(Fortune, "id", "message")
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=by_message)
    res.render("fortunes.html", fortunes=rows)


def updates(req, res):
    ids = random_ids(queries_count(req.query.get("queries")))
    rows = socketify.db.get_columns(World, ids, "id")
    changed = [(world_id, random_number()) for (world_id,) in rows]
    # One UPDATE for the whole batch, in the request's db_session (committed when the
    # handler returns), rather than one UPDATE per changed entity at commit.
    socketify.db.update_rows(World, ["randomNumber"], changed)
    res.json([{"id": world_id, "randomNumber": number} for world_id, number in changed])


for _path, _handler in (
    ("/db", single_query), ("/queries", queries), ("/fortunes", fortunes), ("/updates", updates)
):  # fmt: skip
    server.get(_path, _handler).use(db_session)


# -- raw queries ----------------------------------------------------------------------------------

raw = server.group("/raw").use(socketify.db.middleware(db))

# Prepared once per pooled connection; rows come back as tuples.
read_world = db.statement("SELECT id, randomnumber FROM world WHERE id = $1")
read_fortunes = db.statement("SELECT id, message FROM fortune")
# One statement for all the rows, in id order like the reads.
write_worlds = db.statement(
    "UPDATE world SET randomnumber = new.number"
    " FROM unnest($1::int[], $2::int[]) AS new(id, number)"
    " WHERE world.id = new.id"
)


@raw.get("/db")
def raw_single_query(req, res):
    found, number = read_world.one(random_id())
    res.json({"id": found, "randomNumber": number})


def _read_worlds(ids: list[int]) -> list[dict[str, Any]]:
    # One SELECT per id, all sent in one round trip where the driver allows (pipeline mode).
    rows = read_world.one_each([(world_id,) for world_id in ids])
    return [{"id": found, "randomNumber": number} for found, number in rows]


@raw.get("/queries")
def raw_queries(req, res):
    res.json(_read_worlds(random_ids(queries_count(req.query.get("queries")))))


@raw.get("/fortunes")
def raw_fortunes(req, res):
    rows = read_fortunes.all()
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=by_message)
    res.render("fortunes.html", fortunes=rows)


@raw.get("/updates")
def raw_updates(req, res):
    answer = _read_worlds(random_ids(queries_count(req.query.get("queries"))))
    for world in answer:
        world["randomNumber"] = random_number()
    ids = [world["id"] for world in answer]
    numbers = [world["randomNumber"] for world in answer]
    write_worlds.run(ids, numbers)
    res.json(answer)
