"""The worker's boot step that makes the importable C drivers wait cooperatively.

It runs after monkey-patching and before the app is imported. psycopg2 is imported here when
it is installed, so its callback is in place whatever imports it later. psycopg 3 chooses its
wait function when it is imported: after patching it picks the select-based one (cooperative
through gevent's `select`) by itself; imported before (`--preload`, `workers=0`), it kept the
C function, which blocks the worker, and is moved to the select-based one here. PyMySQL and
redis-py need nothing: they call the `socket` module, which gevent patched in place.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from typing import Any

from socketify.drivers.psycopg2_wait import cooperate_with_gevent

__all__ = ["COOPERATIVE_ENV", "make_cooperative", "warn_blocking"]

log = logging.getLogger("socketify.worker")

COOPERATIVE_ENV = "SOCKETIFY_COOPERATIVE_DRIVERS"  # "0" turns the whole step off


def enabled() -> bool:
    """Whether the environment leaves cooperative drivers on (the default)."""
    return os.environ.get(COOPERATIVE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def make_cooperative() -> list[str]:
    """Make every importable C driver wait cooperatively; returns the drivers it changed."""
    if not enabled():
        return []
    changed = []
    if importlib.util.find_spec("psycopg2") is not None and cooperate_with_gevent():
        changed.append("psycopg2")
    if _psycopg3_waits_cooperatively():
        changed.append("psycopg")
    return changed


def _psycopg3_waits_cooperatively() -> bool:
    """Move an already imported psycopg 3 off its blocking C wait; True if it was on it."""
    waiting: Any = sys.modules.get("psycopg.waiting")
    if waiting is None:
        return False  # imported later, after patching: psycopg picks the select-based wait
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("select"):
        return False
    if waiting.wait is not getattr(waiting, "wait_c", None):
        return False
    import selectors

    # The same choice psycopg makes for itself when it is imported after gevent patched
    # `select`; its connect wait uses the selector class it saw at import, so that moves too.
    waiting.wait = waiting.wait_select
    waiting.DefaultSelector = selectors.DefaultSelector
    return True


def warn_blocking() -> None:
    """Log once that the app imported mysqlclient, whose queries block the whole worker."""
    if "MySQLdb" in sys.modules and enabled():
        log.warning(
            "mysqlclient (MySQLdb) blocks the whole worker during every query under gevent;"
            " use PyMySQL (pure Python, cooperative) or more workers"
        )
