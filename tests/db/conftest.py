"""Fixtures for the database tests: a fresh, private database per test on each engine, and
each test run with socketify.db's fast path on and off.

SQLite gets a file in the test's tmp_path; PostgreSQL a schema of its own in database `test`
(via `?schema=`); MariaDB a database of its own. Each is dropped afterwards, so runs and
tests never see each other's tables. PostgreSQL and MariaDB tests skip when the server is not
running — or fail, under SOCKETIFY_REQUIRE_SERVICES=1 (see tests/support/services.py).

A module that says `pytestmark = pytest.mark.usefixtures("fast_path")` runs each of its tests
twice, `[fast]` and `[plain]` (SOCKETIFY_DB_FAST_PATH=1 and 0, which the servers and scripts
a test starts inherit); `@pytest.mark.fast_path_only` on a test or module keeps only `[fast]`,
for what tests the fast path's own workings. On a Pony release the fast path was not verified
against, `[fast]` skips, unless the run sets SOCKETIFY_DB_FAST_PATH=force: the way to try a
new Pony release (see socketify/db/fastpath/__init__.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from socketify.db import fastpath
from tests.db.db_support import (
    MYSQL_HOST,
    MYSQL_PORT,
    PG_ADMIN_URL,
    mysql_admin,
    pg_admin,
    unique_name,
)

ENGINES = ("sqlite", "postgres", "mysql")
FAST_PATH_MODES = ("fast", "plain")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fast_path_only: run only with socketify.db's fast path on (`[fast]`)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fast_path" in metafunc.fixturenames:
        only_fast = metafunc.definition.get_closest_marker("fast_path_only") is not None
        modes = FAST_PATH_MODES[:1] if only_fast else FAST_PATH_MODES
        metafunc.parametrize("fast_path", modes, indirect=True)


@pytest.fixture
def fast_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """True with the fast path on (`[fast]`), False with plain Pony (`[plain]`)."""
    forced = os.environ.get(fastpath.ENV, "").strip().lower() == "force"
    if request.param == "plain":
        monkeypatch.setenv(fastpath.ENV, "0")
        return False
    reason = fastpath.refusal()
    if reason is not None and not forced:
        pytest.skip(f"fast path: {reason} ({fastpath.ENV}=force tries it)")
    monkeypatch.setenv(fastpath.ENV, "force" if forced else "1")
    return True


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file of this test's own."""
    return f"sqlite:///{tmp_path / 'test.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL schema of this test's own, dropped afterwards."""
    admin = pg_admin()
    schema = unique_name()
    yield f"{PG_ADMIN_URL}?schema={schema}&application_name={schema}"
    with admin.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (schema,),
        )
        cursor.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    admin.close()


@pytest.fixture
def mysql_url() -> Iterator[str]:
    """A MariaDB database of this test's own, dropped afterwards."""
    admin = mysql_admin()
    name = unique_name()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    yield f"mysql://root@{MYSQL_HOST}:{MYSQL_PORT}/{name}"
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    admin.close()


@pytest.fixture(params=ENGINES)
def any_url(request: pytest.FixtureRequest) -> str:
    """The same test on SQLite, PostgreSQL and MariaDB."""
    fixture = {"sqlite": "sqlite_url", "postgres": "pg_url", "mysql": "mysql_url"}[request.param]
    return str(request.getfixturevalue(fixture))
