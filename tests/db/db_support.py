"""Helpers for the database tests: where the servers are, and admin connections."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.services import require_module, require_service

__all__ = [
    "MYSQL_HOST",
    "MYSQL_PORT",
    "PG_ADMIN_URL",
    "PG_HOST",
    "PG_PORT",
    "mysql_admin",
    "pg_admin",
    "unique_name",
]

PG_HOST, PG_PORT = "127.0.0.1", 5432
MYSQL_HOST, MYSQL_PORT = "127.0.0.1", 3306
PG_ADMIN_URL = f"postgres://postgres@{PG_HOST}:{PG_PORT}/test"


def unique_name() -> str:
    """A schema/database name no other test or run uses."""
    return f"t_{uuid.uuid4().hex[:12]}"


def pg_admin() -> Any:
    """An autocommit psycopg2 connection for setting up, inspecting and tearing down."""
    require_service("PostgreSQL", PG_HOST, PG_PORT)
    psycopg2 = require_module("psycopg2", "pip install psycopg2-binary")
    con = psycopg2.connect(host=PG_HOST, port=PG_PORT, user="postgres", dbname="test")
    con.autocommit = True
    return con


def mysql_admin() -> Any:
    """An autocommit pymysql connection for creating and dropping test databases."""
    require_service("MariaDB", MYSQL_HOST, MYSQL_PORT)
    pymysql = require_module("pymysql", "pip install pymysql")
    return pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user="root", autocommit=True)
