"""examples/orm_demo.py: set up once by the master (`--preload`), served by 2 real workers, and
started again with `python -m` on the same database without doing anything twice."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess, run_cli

pytestmark = pytest.mark.timeout(60)

APP = "examples.orm_demo"
DOCUMENT_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('orm') / 'orm_demo.db'}"


@pytest.fixture(scope="module")
def demo(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("orm_logs")) as launcher:
        yield launcher(
            f"{APP}:server", workers=2, args=["--preload"], env={"DATABASE_URL": database}
        )


def test_the_overview_counts_the_seeded_rows_the_migrated_flag_and_a_real_note_id(
    demo: ServerProcess,
) -> None:
    overview = requests.get(demo.url + "/", timeout=5).json()
    assert overview["users"] == 2 and overview["posts"] == 3  # the rolled-back user is absent
    assert overview["flags"] == [{"name": "seeded", "enabled": True}]
    assert DOCUMENT_ID.fullmatch(overview["note"])


def test_users_come_with_their_posts_and_capitalised_names(demo: ServerProcess) -> None:
    users = requests.get(demo.url + "/users", timeout=5).json()
    assert [(u["name"], u["posts"]) for u in users][:2] == [
        ("Ada", ["Notes on the engine", "On the loom"]),
        ("Grace", ["Compilers"]),
    ]
    assert requests.get(demo.url + "/users/1", timeout=5).json()["name"] == "Ada"
    for missing in ("/users/999", "/users/abc"):
        answer = requests.get(demo.url + missing, timeout=5)
        assert (answer.status_code, answer.json()) == (404, {"error": "not found"})


def test_a_user_and_their_first_post_are_committed_together_or_not_at_all(
    demo: ServerProcess,
) -> None:
    before = requests.get(demo.url + "/", timeout=5).json()
    created = requests.post(
        demo.url + "/users",
        json={"name": "linus", "email": "Linus@Example.com", "first_post": "hello"},
        timeout=5,
    )
    assert created.status_code == 201
    assert created.json() | {"id": 0} == {
        "id": 0,
        "name": "Linus",
        "email": "linus@example.com",
        "posts": ["hello"],
    }
    taken = requests.post(
        demo.url + "/users",
        json={"name": "again", "email": "linus@example.com", "first_post": "lost"},
        timeout=5,
    )
    assert taken.status_code == 409 and taken.json()["error"] == "already exists"
    invalid = requests.post(demo.url + "/users", json={"name": "x", "email": "nope"}, timeout=5)
    assert invalid.status_code == 422 and "email" in invalid.json()["errors"]
    not_json = requests.post(demo.url + "/users", data=b"[1, 2]", timeout=5)
    assert not_json.status_code == 400
    after = requests.get(demo.url + "/", timeout=5).json()
    assert (after["users"], after["posts"]) == (before["users"] + 1, before["posts"] + 1)


def test_notes_are_found_by_their_indexed_tag(demo: ServerProcess) -> None:
    with requests.Session() as session:  # one connection, one worker: notes are per process
        note = session.post(
            demo.url + "/notes", json={"tag": "todo", "text": "write docs"}, timeout=5
        )
        assert note.status_code == 201 and DOCUMENT_ID.fullmatch(note.json()["_id"])
        found = session.get(demo.url + "/notes", params={"tag": "todo"}, timeout=5).json()
        assert found == [note.json()]
        assert session.get(demo.url + "/notes?tag=none", timeout=5).json() == []
        refused = session.post(demo.url + "/notes", json={"tag": "todo"}, timeout=5)
        assert refused.status_code == 422


def test_python_dash_m_on_the_same_database_repeats_nothing_and_reports(
    demo: ServerProcess, database: str, tmp_path: Path
) -> None:
    port = free_port()
    argv = [sys.executable, "-m", APP]
    with Launcher(tmp_path) as launcher:
        again = launcher.spawn(
            argv, ("127.0.0.1", port), env={"DATABASE_URL": database, "PORT": str(port)}
        )
        again.wait_output(rf"Serving on http://127\.0\.0\.1:{port}")
        report = again.output()
        assert "migrations applied now: none (already applied)" in report
        assert "relation (user has_many posts) -> Ada: Notes on the engine, On the loom" in report
        assert "rolled back: CacheIndexError; alan kept: False" in report
        assert re.search(r"note id=[0-9a-f]{32} ", report)
        overview = requests.get(f"http://127.0.0.1:{port}/", timeout=5).json()
        assert overview["flags"] == [{"name": "seeded", "enabled": True}]
        assert overview["users"] == requests.get(demo.url + "/", timeout=5).json()["users"]


def test_socketify_db_sees_the_migration_registered_in_code(
    demo: ServerProcess, database: str
) -> None:
    status = run_cli("db", "status", "--app", APP, env={"DATABASE_URL": database})
    assert status.returncode == 0, status.stderr
    assert status.stdout.split()[:3] == ["applied", "20260720", "seed_flag"]


def test_a_note_written_through_one_worker_is_read_alike_through_every_worker(
    demo: ServerProcess,
) -> None:
    posted = requests.post(demo.url + "/notes", json={"tag": "shared", "text": "one"}, timeout=5)
    assert posted.status_code == 201
    # Fresh connections spread over both workers (SO_REUSEPORT): each must see the note.
    answers = set()
    for _ in range(20):
        with requests.Session() as fresh:
            notes = fresh.get(demo.url + "/notes?tag=shared", timeout=5).json()
        answers.add(tuple(note["_id"] for note in notes))
    assert answers == {(posted.json()["_id"],)}
