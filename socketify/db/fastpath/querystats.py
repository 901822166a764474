"""`count_query`: Pony's per-thread query statistics, kept for a statement run outside Pony.

Pony records every statement it runs in `db.last_sql` and in `db.local_stats` (a `QueryStat`
per SQL text, plus a total under `None`); the compiled primary-key read (`fastpath.loader`)
runs its statement itself and records it the same way here.
"""

from __future__ import annotations

from time import time
from typing import Any

from pony.orm.core import QueryStat

__all__ = ["count_query"]


def count_query(db: Any, sql: str, started: float) -> None:
    """Pony's `_update_local_stat`: `db.last_sql` and the per-thread query statistics (each
    `QueryStat.query_executed` inlined for a statement seen before)."""
    duration = time() - started
    # Pony's `Database._dblocal`: the per-greenlet `DbLocal` holding `last_sql` and `stats`,
    # which `db.last_sql` and `db.local_stats` read.
    local = db._dblocal.__dict__  # noqa: SLF001
    local["last_sql"] = sql
    stats = local["stats"]
    stat = stats.get(sql)
    total = stats.get(None)
    if stat is None or total is None or not stat.db_count or not total.db_count:
        _count_first(stats, sql, duration)
        return
    # PERF: the two updates written out, no loop.
    stat.db_count += 1
    stat.sum_time += duration
    if duration < stat.min_time:
        stat.min_time = duration
    elif duration > stat.max_time:
        stat.max_time = duration
    total.db_count += 1
    total.sum_time += duration
    if duration < total.min_time:
        total.min_time = duration
    elif duration > total.max_time:
        total.max_time = duration


def _count_first(stats: dict[Any, Any], sql: str, duration: float) -> None:
    for key in (sql, None):
        stat = stats.get(key)
        if stat is None:
            stats[key] = QueryStat(key, duration)
        else:
            stat.query_executed(duration)
