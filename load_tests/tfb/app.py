"""Ours: `socketify run load_tests.tfb.app:server` serves the six TechEmpower test types.

At TechEmpower's paths (`/json`, `/db`, `/queries?queries=`, `/fortunes`,
`/updates?queries=`, `/plaintext`) the database tests use Pony entities through
`socketify.db`, as an application would: `World[id]`, `Fortune.select()`, an attribute set in
the request's `db_session`, which commits it. Under `/raw/...` the same four database tests
use `socketify.db`'s raw queries (`db.get`, `db.select`, `db.execute`) on the same pooled
connections, without the ORM. `/json` and `/plaintext` touch no database.

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

orm = server.group("").use(socketify.db.middleware(db))


@orm.get("/db")
def single_query(req, res):
    world = World[random_id()]
    res.json({"id": world.id, "randomNumber": world.randomNumber})


@orm.get("/queries")
def queries(req, res):
    worlds = [World[i] for i in random_ids(queries_count(req.query.get("queries")))]
    res.json([{"id": world.id, "randomNumber": world.randomNumber} for world in worlds])


@orm.get("/fortunes")
def fortunes(req, res):
    rows = [(fortune.id, fortune.message) for fortune in Fortune.select()]
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=by_message)
    res.render("fortunes.html", fortunes=rows)


@orm.get("/updates")
def updates(req, res):
    # Every row is read before any is changed: a change is flushed before the session's next
    # query, and would hold its row's lock through all the reads that follow.
    worlds = [World[i] for i in random_ids(queries_count(req.query.get("queries")))]
    for world in worlds:
        world.randomNumber = random_number()
    res.json([{"id": world.id, "randomNumber": world.randomNumber} for world in worlds])
    # the session commits the changed rows when the handler returns


# -- raw queries ----------------------------------------------------------------------------------

raw = server.group("/raw").use(socketify.db.middleware(db))

# Pony's raw SQL: `$name` is a value of the dictionary passed with the query.
READ_WORLD = "SELECT id, randomnumber FROM world WHERE id = $world_id"
# One statement for all the rows, in id order like the reads.
WRITE_WORLDS = (
    "UPDATE world SET randomnumber = new.number"
    " FROM unnest($ids::int[], $numbers::int[]) AS new(id, number)"
    " WHERE world.id = new.id"
)


@raw.get("/db")
def raw_single_query(req, res):
    found, number = db.get(READ_WORLD, {"world_id": random_id()})
    res.json({"id": found, "randomNumber": number})


def _read_worlds(ids: list[int]) -> list[dict[str, Any]]:
    read = db.get
    answer = []
    for world_id in ids:
        found, number = read(READ_WORLD, {"world_id": world_id})
        answer.append({"id": found, "randomNumber": number})
    return answer


@raw.get("/queries")
def raw_queries(req, res):
    res.json(_read_worlds(random_ids(queries_count(req.query.get("queries")))))


@raw.get("/fortunes")
def raw_fortunes(req, res):
    rows = db.select("SELECT id, message FROM fortune")
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
    db.execute(WRITE_WORLDS, {"ids": ids, "numbers": numbers})
    res.json(answer)
