"""Peer: Starlette + asyncpg without an ORM on uvicorn (load_tests/.venv only).

    uvicorn load_tests.tfb.peer_starlette:app --http httptools --loop uvloop

The fastest Python pattern of TechEmpower's database tests: an asyncpg pool of at most
`TFB_POOL_SIZE` connections per worker, statements asyncpg prepares and caches per
connection, updates sent with one `executemany`, JSON through orjson.
"""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg
import jinja2
import orjson
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from load_tests.tfb.spec import (
    ADDITIONAL_FORTUNE,
    FORTUNE_TEMPLATE,
    HELLO,
    MESSAGE,
    POOL_SIZE,
    database_url,
    pg_settings,
    queries_count,
    random_id,
    random_ids,
    random_number,
)

READ = "SELECT id, randomnumber FROM world WHERE id = $1"
WRITE = "UPDATE world SET randomnumber = $1 WHERE id = $2"
fortunes_template = jinja2.Environment(autoescape=True).from_string(FORTUNE_TEMPLATE)
pool: Any = None


class ORJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


@contextlib.asynccontextmanager
async def lifespan(app):
    global pool
    pool = await asyncpg.create_pool(
        **pg_settings(),
        min_size=1,
        max_size=POOL_SIZE,
        server_settings={"search_path": database_url()[1]},
    )
    yield
    await pool.close()


async def json(request):
    return ORJSONResponse({"message": MESSAGE})


async def plaintext(request):
    return PlainTextResponse(HELLO)


async def single_query(request):
    async with pool.acquire() as con:
        row = await con.fetchrow(READ, random_id())
    return ORJSONResponse({"id": row[0], "randomNumber": row[1]})


async def queries(request):
    ids = random_ids(queries_count(request.query_params.get("queries")))
    async with pool.acquire() as con:
        statement = await con.prepare(READ)
        answer = []
        for i in ids:
            row = await statement.fetchrow(i)
            answer.append({"id": row[0], "randomNumber": row[1]})
    return ORJSONResponse(answer)


async def fortunes(request):
    async with pool.acquire() as con:
        rows = [tuple(row) for row in await con.fetch("SELECT id, message FROM fortune")]
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=lambda row: row[1])
    return HTMLResponse(fortunes_template.render(fortunes=rows))


async def updates(request):
    ids = random_ids(queries_count(request.query_params.get("queries")))
    async with pool.acquire() as con:
        statement = await con.prepare(READ)
        answer = []
        for i in ids:
            row = await statement.fetchrow(i)
            answer.append({"id": row[0], "randomNumber": random_number()})
        await con.executemany(WRITE, [(world["randomNumber"], world["id"]) for world in answer])
    return ORJSONResponse(answer)


app = Starlette(
    routes=[
        Route("/json", json),
        Route("/plaintext", plaintext),
        Route("/db", single_query),
        Route("/queries", queries),
        Route("/fortunes", fortunes),
        Route("/updates", updates),
    ],
    lifespan=lifespan,
)
