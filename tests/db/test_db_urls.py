"""Database URLs: dialects, SQLite paths, driver parameters, schemas, redaction."""

from __future__ import annotations

import os

import pytest

from socketify.db import parse_url


def test_sqlite_three_slashes_is_relative_to_the_working_directory() -> None:
    url = parse_url("sqlite:///data/app.db")
    assert url.dialect == "sqlite"
    assert url.params["filename"] == os.path.join(os.getcwd(), "data/app.db")


def test_sqlite_four_slashes_is_absolute() -> None:
    assert parse_url("sqlite:////var/lib/app.db").params["filename"] == "/var/lib/app.db"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_sqlite_memory_forms(url: str) -> None:
    assert parse_url(url).memory


def test_sqlite_busy_timeout_parameter() -> None:
    assert parse_url("sqlite:///a.db?timeout=2.5").params["timeout"] == 2.5
    assert parse_url("sqlite:///a.db").params["timeout"] == 5.0


def test_unknown_sqlite_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown SQLite URL parameters: mode"):
        parse_url("sqlite:///a.db?mode=ro")


def test_postgres_url_gives_psycopg2_keywords_and_schema() -> None:
    url = parse_url("postgresql://ann:s%40cret@db.example:6543/shop?sslmode=require&schema=tenant1")
    assert url.dialect == "postgres"
    assert url.params == {
        "host": "db.example",
        "port": 6543,
        "user": "ann",
        "password": "s@cret",
        "dbname": "shop",
        "sslmode": "require",
    }
    assert url.schema == "tenant1"


def test_postgres_schema_must_be_an_identifier() -> None:
    with pytest.raises(ValueError, match="invalid schema"):
        parse_url("postgres://h/db?schema=a;drop")


def test_mysql_url_gives_pymysql_keywords_with_numbers() -> None:
    url = parse_url("mysql://root:pw@127.0.0.1:3306/test?charset=utf8mb4&connect_timeout=3")
    assert url.dialect == "mysql"
    assert url.params == {
        "host": "127.0.0.1",
        "port": 3306,
        "user": "root",
        "password": "pw",
        "database": "test",
        "charset": "utf8mb4",
        "connect_timeout": 3,
    }


def test_unsupported_scheme_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="postgres://"):
        parse_url("oracle://x/y")


def test_redacted_hides_the_password() -> None:
    assert parse_url("postgres://ann:secret@h/db").redacted() == "postgres://ann:***@h/db"
