"""Peer: FastAPI + SQLAlchemy ORM (async, asyncpg) on uvicorn (load_tests/.venv only).

    uvicorn load_tests.tfb.peer_fastapi:app --http httptools --loop uvloop

Each worker's SQLAlchemy pool holds at most `TFB_POOL_SIZE` connections.
"""

from __future__ import annotations

import jinja2
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, PlainTextResponse
from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from load_tests.tfb.spec import (
    ADDITIONAL_FORTUNE,
    FORTUNE_TEMPLATE,
    HELLO,
    MESSAGE,
    POOL_SIZE,
    database_url,
    queries_count,
    random_id,
    random_ids,
    random_number,
)

_url, _schema = database_url()
engine = create_async_engine(
    _url.replace("postgres://", "postgresql+asyncpg://", 1),
    pool_size=POOL_SIZE,
    max_overflow=0,
    connect_args={"server_settings": {"search_path": _schema}},
)
sessions = async_sessionmaker(engine, expire_on_commit=False)
fortunes_template = jinja2.Environment(autoescape=True).from_string(FORTUNE_TEMPLATE)


class Base(DeclarativeBase):
    pass


class World(Base):
    __tablename__ = "world"
    id: Mapped[int] = mapped_column(primary_key=True)
    randomNumber: Mapped[int] = mapped_column("randomnumber")


class Fortune(Base):
    __tablename__ = "fortune"
    id: Mapped[int] = mapped_column(primary_key=True)
    message: Mapped[str]


app = FastAPI()


@app.get("/json")
async def json():
    return {"message": MESSAGE}


@app.get("/plaintext", response_class=PlainTextResponse)
async def plaintext():
    return PlainTextResponse(HELLO)


@app.get("/db")
async def single_query():
    async with sessions() as session:
        world = await session.get(World, random_id())
        return {"id": world.id, "randomNumber": world.randomNumber}


@app.get("/queries")
async def queries(queries: str | None = None):
    async with sessions() as session:
        worlds = [await session.get(World, i) for i in random_ids(queries_count(queries))]
        return [{"id": w.id, "randomNumber": w.randomNumber} for w in worlds]


@app.get("/fortunes", response_class=HTMLResponse)
async def fortunes():
    async with sessions() as session:
        rows = [(f.id, f.message) for f in await session.scalars(select(Fortune))]
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=lambda row: row[1])
    return HTMLResponse(fortunes_template.render(fortunes=rows))


@app.get("/updates")
async def updates(queries: str | None = None):
    async with sessions() as session:
        worlds = [await session.get(World, i) for i in random_ids(queries_count(queries))]
        for world in worlds:
            world.randomNumber = random_number()
        answer = [{"id": w.id, "randomNumber": w.randomNumber} for w in worlds]
        await session.commit()
    return answer
