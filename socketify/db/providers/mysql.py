"""MySQL and MariaDB (pymysql): Pony's provider on a bounded pool.

pymysql is pure Python, so under gevent its sockets are already cooperative. Pony's MySQL
provider takes mysqlclient (`MySQLdb`) instead whenever that is installed, and mysqlclient's C
calls block the whole worker, so this module has Pony choose while `MySQLdb` cannot be
imported: socketify.db always talks to MySQL through pymysql.
"""

from __future__ import annotations

import importlib
import logging
import sys
from types import ModuleType

from socketify.db.providers.base import Pooled

__all__ = ["Provider"]

log = logging.getLogger("socketify.error")


def _pony_mysql_on_pymysql() -> ModuleType:
    """Pony's MySQL provider module, its driver chosen with MySQLdb out of reach."""
    name = "pony.orm.dbproviders.mysql"
    if name in sys.modules:
        module = sys.modules[name]
    else:
        hidden = sys.modules.get("MySQLdb")
        sys.modules["MySQLdb"] = None  # type: ignore[assignment]  # import MySQLdb fails
        try:
            module = importlib.import_module(name)
        finally:
            if hidden is None:
                del sys.modules["MySQLdb"]
            else:
                sys.modules["MySQLdb"] = hidden
    if module.mysql_module_name != "pymysql":
        log.warning(
            "Pony's MySQL provider was imported before socketify.db and took %s, which blocks "
            "the worker on every query: import socketify.db first",
            module.mysql_module_name,
        )
    return module


class Provider(Pooled, _pony_mysql_on_pymysql().MySQLProvider):  # type: ignore[misc]
    """Pony's MySQL provider with a bounded pool, on pymysql."""
