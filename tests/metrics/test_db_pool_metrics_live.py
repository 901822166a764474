"""Database pool metrics of a live server: connections in use, and requests that waited."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.prometheus import sample, scrape
from tests.support.raw_client import get
from tests.support.serve import Launcher
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(90)


def test_busy_pool_connections_and_waits_are_counted(serve: Launcher, tmp_path: Path) -> None:
    metrics = ("127.0.0.1", free_port())
    env = {"DB_URL": f"sqlite:///{tmp_path / 'pool.db'}", "POOL_SIZE": "1", "POOL_TIMEOUT": "10"}
    server = serve(
        "tests.db.apps.db_live_app:server",
        workers=1,
        env=env,
        args=("--metrics-bind", f"{metrics[0]}:{metrics[1]}"),
    )
    holders = [
        threading.Thread(target=get, args=(server.tcp, "/hold?ms=1500"), kwargs={"timeout": 15})
        for _ in range(3)
    ]
    for holder in holders:
        holder.start()
    wait_for(
        lambda: sample(scrape(metrics), "socketify_db_pool_in_use") == 1,
        timeout=10,
        message="the pool's one connection in use",
    )
    for holder in holders:
        holder.join(timeout=15)
    samples = scrape(metrics)
    assert sample(samples, "socketify_db_pool_waits_total") == 2
    assert (
        sample(samples, "socketify_http_requests_total", method="GET", route="/hold", status="200")
        == 3
    )
