"""PostgreSQL pipeline mode: N executions of one read sent in one round trip (psycopg 3).

    read_world = db.statement("SELECT id, randomnumber FROM world WHERE id = $1")
    rows = read_world.one_each([(17,), (42,), (99,)])    # three SELECTs, one round trip

Theory of operation. Each execution of a statement costs the worker a `send` to the server,
a wait for the answer and a wake-up of the greenlet: under load, the `send` system call alone
is most of a primary-key read's CPU time. libpq's pipeline mode queues many executions and
sends them in one write, then reads the answers in order. psycopg2 has no pipeline mode;
psycopg 3 exposes libpq's (`psycopg.pq`), so when psycopg 3 is installed (the
`postgres-pipeline` extra) a database keeps a second bounded pool, of psycopg 3 connections
with the same settings, for these reads. Each execution is still a statement of its own
(prepared on the connection with the first batch), answered in order; an execution that
fails raises its error, as Pony's exception, once the batch is read.

When it is used: `one_each` on PostgreSQL, in a `db_session` that has not used the database
yet and starts no transaction — the case where a read would borrow a pooled connection for
itself anyway (see socketify.db.statements). Anywhere else (the session holds a connection,
or psycopg 3 is missing) `one_each` runs `one` per row.

Cooperation with gevent. A batch waits for its socket with `select.select`, which in a
monkey-patched process is gevent's: the greenlet parks, the worker serves other requests.
Opening a connection waits through psycopg's `wait_conn`, which uses the `selectors` module
and so cooperates the same way. Nothing here goes through psycopg's C wait function, the one
part of psycopg 3 that would block the hub.

A worker may then hold up to twice `pool_size` connections: `pool_size` of each driver.
`@db.on_connect` hooks run on psycopg2 connections only.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from socketify.db.pool import BoundedPool

__all__ = ["PipelineReads", "as_pony_error", "pipeline_refusal"]


def pipeline_refusal() -> str | None:
    """Why pipelined reads cannot run in this process, or None when they can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed (pip install socketify-gevent[postgres-pipeline])"
    return None


class Psycopg3Recipe:
    """psycopg 3 connections in autocommit mode that remember what they prepared."""

    usable_unless_closed = True

    def __init__(self, params: dict[str, Any], schema: str | None) -> None:
        self.params = dict(params)
        if schema is not None:
            option = f"-c search_path={schema}"
            given = self.params.get("options")
            self.params["options"] = f"{given} {option}" if given else option

    def open(self) -> Any:
        """A new connection."""
        connection = _connection_class().connect(autocommit=True, **self.params)
        connection.prepared_statements = set()
        return connection

    def reset(self, con: Any) -> None:
        """Nothing to end: the connection is in autocommit mode and every read is done."""

    def usable(self, con: Any) -> bool:
        """psycopg's own flag."""
        return not con.closed

    def close(self, con: Any) -> None:
        """Close the connection."""
        con.close()


@functools.cache
def _connection_class() -> Any:
    """psycopg 3's connection with a set of the statements prepared on it (imported late:
    psycopg picks how to wait when it is imported, so after gevent has patched)."""
    import psycopg

    class PipelineConnection(psycopg.Connection):
        """A psycopg 3 connection that remembers the statements prepared on it."""

        prepared_statements: set[str]

    return PipelineConnection


class PipelineReads:
    """One database's psycopg 3 pool, for reads sent together."""

    def __init__(self, params: dict[str, Any], schema: str | None, pool: BoundedPool) -> None:
        self.pool = BoundedPool(Psycopg3Recipe(params, schema), pool.size, pool.timeout)

    def one_each(
        self, name: str, sql: str, rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...] | None]:
        """The first row each execution of the statement `sql` (`$n` parameters, prepared as
        `name`) returns, for each row of values, in order; None where one returned none."""
        pool = self.pool
        connection, _ = pool.connect()
        try:
            found = _pipelined(connection, name, sql, rows)
        except Exception:
            if connection.closed:
                pool.drop(connection)
            else:
                pool.release(connection)
            raise
        except BaseException:
            pool.drop(connection)  # interrupted mid-pipeline (a timeout): state unknown
            raise
        pool.release(connection)
        return found

    def close_idle(self) -> int:
        """Close this process's idle connections (before a fork, and on disconnect)."""
        return self.pool.close_idle()


def _pipelined(
    connection: Any, name: str, sql: str, rows: Sequence[Sequence[Any]]
) -> list[tuple[Any, ...] | None]:
    """Send every execution, then one sync, in one write; read the answers in order.

    PERF: libpq's pipeline calls directly, not psycopg's `executemany`, whose pipeline
    flushes and polls once per execution: under gevent that is a send and a greenlet switch
    per row, the very costs the pipeline is for."""
    from psycopg import pq
    from psycopg.adapt import PyFormat, Transformer

    pgconn = connection.pgconn
    transformer = Transformer(connection)
    prepared: set[str] = connection.prepared_statements
    key = name.encode()
    preparing = name not in prepared
    pgconn.enter_pipeline_mode()
    try:
        if preparing:
            pgconn.send_prepare(key, sql.encode())
        formats = None
        for values in rows:
            if formats is None:
                formats = [PyFormat.TEXT] * len(values)
            params = transformer.dump_sequence(values, formats)
            pgconn.send_query_prepared(key, params, param_formats=transformer.formats)
        pgconn.pipeline_sync()
        _flush(pgconn)
        answers = _answers(pgconn, transformer, prepared if preparing else None, name)
    finally:
        if pgconn.pipeline_status != pq.PipelineStatus.OFF and not connection.closed:
            pgconn.exit_pipeline_mode()
    return answers


def _answers(
    pgconn: Any, transformer: Any, prepared: set[str] | None, name: str
) -> list[tuple[Any, ...] | None]:
    """Read the batch's results up to its sync; `prepared` (when the batch began with the
    PREPARE of `name`) records the name once the server has accepted it."""
    from psycopg import errors, pq

    answers: list[tuple[Any, ...] | None] = []
    error: Exception | None = None
    skip = prepared is not None  # the PREPARE's own answer comes first
    while True:
        result = _next_result(pgconn)
        if result is None:
            continue  # the end of one execution's results
        status = result.status
        if status == pq.ExecStatus.PIPELINE_SYNC:
            break
        if status == pq.ExecStatus.FATAL_ERROR:
            message = (result.error_message or b"").decode(errors="replace").strip()
            sqlstate = result.error_field(pq.DiagnosticField.SQLSTATE)
            kind = errors.lookup(sqlstate.decode()) if sqlstate else errors.DatabaseError
            error = error or kind(message)
        elif skip and prepared is not None and status == pq.ExecStatus.COMMAND_OK:
            prepared.add(name)
        elif status == pq.ExecStatus.TUPLES_OK and not skip:
            transformer.set_pgresult(result)
            answers.append(transformer.load_row(0, tuple) if result.ntuples else None)
        skip = False
    if error is not None:
        raise as_pony_error(error)
    return answers


def as_pony_error(error: Exception) -> Exception:
    """Pony's exception for a psycopg 3 error of the same DB-API kind (the middleware maps
    Pony's), or the error itself."""
    import psycopg
    from pony.orm import dbapiprovider

    for kind in (
        "IntegrityError",
        "DataError",
        "ProgrammingError",
        "OperationalError",
        "NotSupportedError",
        "InternalError",
    ):
        if isinstance(error, getattr(psycopg, kind)):
            translated: Exception = getattr(dbapiprovider, kind)(error)
            return translated
    return error


def _next_result(pgconn: Any) -> Any:
    """The next result once it has fully arrived, parking the greenlet while it has not."""
    while pgconn.is_busy():
        _wait(pgconn.socket, reading=True)
        pgconn.consume_input()
    return pgconn.get_result()


def _flush(pgconn: Any) -> None:
    """Send what libpq has queued, waiting while the socket's buffer is full."""
    pgconn.nonblocking = 1
    try:
        while pgconn.flush():
            _wait(pgconn.socket, reading=False)
    finally:
        pgconn.nonblocking = 0


def _wait(fd: int, reading: bool) -> None:
    # `select` is gevent's in a patched process (the greenlet parks), the kernel's elsewhere.
    import select

    if reading:
        select.select([fd], [], [])
    else:
        select.select([], [fd], [])
