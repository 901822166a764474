"""gunicorn configuration for the database scenarios: psycogreen in every worker, the way
gunicorn `-k gevent` users make psycopg2 cooperative (`gunicorn -c this_file ...`)."""

from __future__ import annotations

from typing import Any


def post_fork(server: Any, worker: Any) -> None:
    """Install psycopg2's gevent wait callback in the freshly forked worker."""
    from psycogreen.gevent import patch_psycopg

    patch_psycopg()
