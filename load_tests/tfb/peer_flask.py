"""Peer: Flask + SQLAlchemy ORM on `gunicorn -k gevent` (load_tests/.venv only).

    gunicorn load_tests.tfb.peer_flask:app -k gevent

psycopg2 is made cooperative with psycogreen, as gevent deployments of it do; each worker's
SQLAlchemy pool holds at most `TFB_POOL_SIZE` connections.
"""

from psycogreen.gevent import patch_psycopg

patch_psycopg()  # before any connection: queries park the greenlet, not the worker

from flask import Flask, Response, jsonify, render_template_string, request  # noqa: E402
from sqlalchemy import create_engine, select  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

from load_tests.tfb.spec import (  # noqa: E402
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
engine = create_engine(
    _url.replace("postgres://", "postgresql+psycopg2://", 1),
    pool_size=POOL_SIZE,
    max_overflow=0,
    connect_args={"options": f"-c search_path={_schema}"},
)


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


app = Flask(__name__)


@app.get("/json")
def json():
    return jsonify(message=MESSAGE)


@app.get("/plaintext")
def plaintext():
    return Response(HELLO, mimetype="text/plain")


@app.get("/db")
def single_query():
    with Session(engine) as session:
        world = session.get(World, random_id())
        return jsonify(id=world.id, randomNumber=world.randomNumber)


@app.get("/queries")
def queries():
    ids = random_ids(queries_count(request.args.get("queries")))
    with Session(engine) as session:
        worlds = [session.get(World, i) for i in ids]
        return jsonify([{"id": w.id, "randomNumber": w.randomNumber} for w in worlds])


@app.get("/fortunes")
def fortunes():
    with Session(engine) as session:
        rows = [(f.id, f.message) for f in session.scalars(select(Fortune))]
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=lambda row: row[1])
    return render_template_string(FORTUNE_TEMPLATE, fortunes=rows)


@app.get("/updates")
def updates():
    ids = random_ids(queries_count(request.args.get("queries")))
    with Session(engine) as session:
        worlds = [session.get(World, i) for i in ids]
        for world in worlds:
            world.randomNumber = random_number()
        answer = [{"id": w.id, "randomNumber": w.randomNumber} for w in worlds]
        session.commit()
    return jsonify(answer)
