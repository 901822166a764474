"""Pony providers whose connections come from a `BoundedPool`, one module per dialect.

Each is imported only when a URL asks for it, so a missing psycopg2 or pymysql matters only
to the applications that use PostgreSQL or MySQL.
"""

from __future__ import annotations

import importlib

__all__ = ["provider_class"]

_MODULES = {"sqlite": "sqlite", "postgres": "postgres", "mysql": "mysql"}
_DRIVERS = {"postgres": "psycopg2-binary", "mysql": "pymysql"}


def provider_class(dialect: str) -> type:
    """The pooled Pony provider class for `dialect` ("sqlite", "postgres" or "mysql")."""
    try:
        module = importlib.import_module(f"socketify.db.providers.{_MODULES[dialect]}")
    except ImportError as exc:
        driver = _DRIVERS.get(dialect, dialect)
        raise ImportError(
            f"the {dialect} database driver is not installed: pip install {driver} "
            f"(or socketify-gevent[{dialect}])"
        ) from exc
    provider: type = module.Provider
    return provider
