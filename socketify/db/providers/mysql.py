"""MySQL and MariaDB (pymysql): Pony's provider on a bounded pool.

pymysql is pure Python, so under gevent its sockets are already cooperative.
"""

from __future__ import annotations

from pony.orm.dbproviders.mysql import MySQLProvider

from socketify.db.providers.base import Pooled

__all__ = ["Provider"]


class Provider(Pooled, MySQLProvider):
    """Pony's MySQL provider with a bounded pool."""
