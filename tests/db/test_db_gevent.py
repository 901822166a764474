"""The pool and Pony's sessions under gevent and fork, in subprocesses (scripts/).

Each script monkey-patches its own process, which pytest's process must not be.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.usefixtures("fast_path")

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def run_script(name: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("pg_url" if request.param == "postgres" else "sqlite_url"))


@pytest.mark.parametrize("order", ["after", "before"])
def test_greenlets_get_separate_sessions_and_wait_cooperatively(url: str, order: str) -> None:
    """`before` is --preload: Pony was imported before gevent patched the process."""
    report = run_script("gevent_sessions.py", url, order)
    # Two concurrent request greenlets do not share a session: A never sees B's pending note
    # (B sees A's once A has committed, which load on the machine may delay).
    assert report["isolation"]["a"] == ["a"]
    assert "b" in report["isolation"]["b"]
    # Pool of 2: the third greenlet waits for a release, and the hub keeps ticking meanwhile.
    wait = report["wait"]
    assert wait["order"].index("waiter got") > wait["order"].index("h1 released")
    assert wait["peak"] == 2
    assert wait["ticks"] >= 10  # ~40 ticks of 5 ms in 0.2 s: the hub was never blocked
    timeout = report["timeout"]
    assert timeout["error"] == 503
    assert 0.25 <= timeout["waited"] < 0.6
    assert timeout["ticks"] >= 30
    if url.startswith("postgres"):
        # psycopg2 runs through a gevent wait callback: two 0.3 s pg_sleep calls overlap.
        assert report["server_side"]["elapsed"] < 0.55  # one after the other: >= 0.6
        assert report["server_side"]["ticks"] >= 15
        # Each pooled connection waits on watchers it keeps, ahead of the worker's other work.
        assert report["watchers"] == {"kept": True, "priorities": [1, 1]}


def test_no_connection_crosses_a_fork(pg_url: str) -> None:
    report = run_script("fork_pool.py", pg_url)
    assert report["idle_before_fork"] == 1
    assert report["idle_after_fork"] == 0  # closed in the parent right before fork
    assert report["child"]["opened_at_start"] == 0  # the child's pool starts empty
    assert report["child"]["backend"] != report["parent_before"]
    assert report["parent_after"] not in (report["parent_before"], report["child"]["backend"])
    assert report["items"] == 3


def test_pipelined_reads_wait_cooperatively(pg_url: str) -> None:
    pytest.importorskip("psycopg", reason="pip install 'psycopg[binary]'")
    report = run_script("gevent_pipeline.py", pg_url)
    assert report["results"] == [[[1], [2]], [[10], [11]]]
    assert report["pipeline_opened"] == 2  # both greenlets read on psycopg 3 connections
    # Each greenlet's two 0.15 s sleeps run one after the other on its connection (0.3 s);
    # the two greenlets overlap, and the hub keeps ticking: one after the other >= 0.6 s.
    assert report["elapsed"] < 0.55
    assert report["ticks"] >= 15
