"""The servers of the TechEmpower comparison, and which implementation each serves.

One server may serve several implementations: ours serves the Pony variant at TechEmpower's
paths and the raw one under `/raw`. Peers run from load_tests/.venv (see
load_tests/contenders.py, whose `PEER_PACKAGES` lists what they need).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from load_tests.contenders import VENV_BIN
from load_tests.harness import HOST, LOAD_TESTS
from load_tests.tfb.verify import DATABASE_TESTS, TEST_TYPES

__all__ = ["IMPLEMENTATIONS", "SERVERS", "Implementation", "Server"]


@dataclass(frozen=True)
class Server:
    """How to start one server with N workers on a port."""

    name: str
    command: Callable[[int, int], list[str]]  # (port, workers) -> argv
    modules: tuple[str, ...] = ()  # what it imports from the peers' virtualenv
    cwd: Path | None = None  # where to start it (None: the repository root)


@dataclass(frozen=True)
class Implementation:
    """One column of the table: a server, the prefix of its paths, the tests it implements."""

    name: str
    label: str
    server: str
    tests: tuple[str, ...]
    prefix: str = ""


def _ours(port: int, workers: int) -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    app = "load_tests.tfb.app:server"
    return [*cli, "run", app, "--workers", str(workers), "--bind", f"{HOST}:{port}"]


def _gunicorn_gevent(app: str) -> Callable[[int, int], list[str]]:
    def command(port: int, workers: int) -> list[str]:
        return [
            str(VENV_BIN / "gunicorn"), app, "-k", "gevent", "--workers", str(workers),
            "--bind", f"{HOST}:{port}", "--log-level", "warning",
        ]  # fmt: skip

    return command


def _uvicorn(app: str) -> Callable[[int, int], list[str]]:
    def command(port: int, workers: int) -> list[str]:
        return [
            str(VENV_BIN / "uvicorn"), app, "--host", HOST, "--port", str(port),
            "--workers", str(workers), "--http", "httptools", "--loop", "uvloop",
            "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip

    return command


def _socketify_py(port: int, workers: int) -> list[str]:
    script = LOAD_TESTS / "tfb" / "peer_socketify_py.py"
    return [str(VENV_BIN / "python"), str(script), "--port", str(port), "--workers", str(workers)]


_ASGI = ("uvicorn", "httptools", "uvloop", "jinja2", "orjson")
SERVERS = {
    server.name: server
    for server in (
        Server("socketify", _ours),
        Server(
            "flask",
            _gunicorn_gevent("load_tests.tfb.peer_flask:app"),
            ("gunicorn.workers.ggevent", "flask", "sqlalchemy", "psycopg2", "psycogreen"),
        ),
        Server(
            "django",
            _gunicorn_gevent("load_tests.tfb.peer_django:application"),
            ("gunicorn.workers.ggevent", "django", "psycopg2", "psycogreen"),
        ),
        Server(
            "fastapi",
            _uvicorn("load_tests.tfb.peer_fastapi:app"),
            (*_ASGI, "fastapi", "sqlalchemy", "asyncpg"),
        ),
        Server("starlette", _uvicorn("load_tests.tfb.peer_starlette:app"), (*_ASGI, "asyncpg")),
        # Started outside the repository: the PyPI package is also named `socketify`.
        Server("socketify.py", _socketify_py, ("socketify", "orjson"), cwd=Path("/tmp")),
    )
}

IMPLEMENTATIONS = {
    implementation.name: implementation
    for implementation in (
        Implementation("ours-pony", "ours: Pony + socketify.db helpers", "socketify", TEST_TYPES),
        Implementation("ours-raw", "ours: raw queries", "socketify", DATABASE_TESTS, "/raw"),
        Implementation("flask", "Flask + SQLAlchemy, gunicorn gevent", "flask", TEST_TYPES),
        Implementation("django", "Django ORM, gunicorn gevent", "django", TEST_TYPES),
        Implementation("fastapi", "FastAPI + SQLAlchemy async", "fastapi", TEST_TYPES),
        Implementation("starlette", "Starlette + asyncpg, no ORM", "starlette", TEST_TYPES),
        Implementation("socketify.py", "socketify.py", "socketify.py", ("json", "plaintext")),
    )
}
