"""psycopg2's wait callback in a patched process (scripts/psycopg2_watchers.py): each
connection keeps its watchers, a reused descriptor gets fresh ones, and a database answer
resumes its greenlet ahead of other sockets that became readable in the same turn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import require_module, require_service

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(__file__).resolve().parent / "scripts" / "psycopg2_watchers.py"
DSN = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="module")
def report() -> Any:
    require_service("postgres", "127.0.0.1", 5432)
    require_module("psycopg2", "pip install -e '.[test]'")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), DSN], capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_connection_waits_on_the_same_watchers_query_after_query(report: Any) -> None:
    assert report["kept"] == {"kept": True, "before_any_wait": True}


def test_a_connection_on_a_closed_ones_descriptor_gets_watchers_of_its_own(
    report: Any,
) -> None:
    assert report["reused"] == {"same_descriptor": True, "own_watchers": True}


def test_a_database_answer_resumes_before_sockets_ready_in_the_same_turn(report: Any) -> None:
    if report["loop"] != "gevent.libev.corecext":
        pytest.skip("watcher priorities are libev's; libuv runs watchers in its own order")
    # libev runs the watchers of one priority last-ready first: without the database's
    # higher priority the query, whose answer came first, would resume last.
    assert report["priority"]["order"][0] == "query", report["priority"]


def test_queries_in_greenlets_overlap_on_the_server(report: Any) -> None:
    assert report["overlap"] < 0.6  # three 0.3 s sleeps one after the other: >= 0.9
