"""Fixtures for the database tests: a fresh, private database per test on each engine.

SQLite gets a file in the test's tmp_path; PostgreSQL a schema of its own in database `test`
(via `?schema=`); MariaDB a database of its own. Each is dropped afterwards, so runs and
tests never see each other's tables. PostgreSQL and MariaDB tests skip when the server is not
running — or fail, under SOCKETIFY_REQUIRE_SERVICES=1 (see tests/services.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from db_support import MYSQL_HOST, MYSQL_PORT, PG_ADMIN_URL, mysql_admin, pg_admin, unique_name

ENGINES = ("sqlite", "postgres", "mysql")


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
