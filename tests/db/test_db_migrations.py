"""Migrations: version order, one transaction each, rollback, status, new — on every engine,
through `Migrator`, the `main()` of `socketify db`, and `python -m socketify.db.cli`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pony.orm import db_session

import socketify.db
from socketify.db.cli import main
from socketify.db.migrations import MigrationError, Migrator

pytestmark = pytest.mark.usefixtures("fast_path")

MIGRATIONS = {
    # Unpadded on purpose: by name "10" sorts before "2"; by version it comes after.
    "1_create_users.py": (
        "db.execute('CREATE TABLE users (id INTEGER PRIMARY KEY, name VARCHAR(50))')",
        "db.execute('DROP TABLE users')",
    ),
    "2_add_email.py": (
        "db.execute('ALTER TABLE users ADD COLUMN email VARCHAR(100)')",
        "db.execute('ALTER TABLE users DROP COLUMN email')",
    ),
    "10_seed.py": (
        "db.execute(\"INSERT INTO users (id, name, email) VALUES (1, 'Ann', 'a@x')\")",
        "db.execute('DELETE FROM users WHERE id = 1')",
    ),
}
BROKEN = (
    "db.execute('CREATE TABLE half_done (id INTEGER PRIMARY KEY)')\n"
    "    db.execute(\"INSERT INTO users (id, name) VALUES (2, 'Bob')\")\n"
    "    raise RuntimeError('migration bug')",
    "pass",
)


def write(directory: Path, name: str, up: str, down: str) -> None:
    directory.mkdir(exist_ok=True)
    source = f"def up(db):\n    {up}\n\n\ndef down(db):\n    {down}\n"
    (directory / name).write_text(source)


def write_all(directory: Path) -> None:
    for name, (up, down) in MIGRATIONS.items():
        write(directory, name, up, down)


def tables(db: Any) -> set[str]:
    with db_session:
        con = db.get_connection()
        cursor = con.cursor()
        if db.dialect == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        elif db.dialect == "postgres":
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        else:
            cursor.execute("SHOW TABLES")
        return {row[0] for row in cursor.fetchall()}


def users(db: Any) -> list[tuple[Any, ...]]:
    with db_session:
        return [tuple(row) for row in db.select("SELECT id, name FROM users ORDER BY id")]


def test_migrate_applies_in_version_order_and_rollback_undoes_newest_first(
    any_url: str, tmp_path: Path
) -> None:
    db = socketify.db.connect(any_url)
    write_all(tmp_path / "migrations")
    migrator = Migrator(db, tmp_path / "migrations")
    assert [m.version for m in migrator.discover()] == [1, 2, 10]
    assert [m.label for m in migrator.migrate()] == ["1_create_users", "2_add_email", "10_seed"]
    assert users(db) == [(1, "Ann")]
    assert migrator.migrate() == []
    assert [s.state for s in migrator.status()] == ["applied"] * 3
    assert [m.version for m in migrator.rollback(2)] == [10, 2]
    assert users(db) == []
    assert [s.state for s in migrator.status()] == ["applied", "pending", "pending"]
    migrator.rollback()
    assert "users" not in tables(db)
    assert [m.version for m in migrator.migrate()] == [1, 2, 10]
    db.disconnect()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_failing_migration_leaves_the_database_as_it_was(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_url" if engine == "postgres" else "sqlite_url")
    db = socketify.db.connect(url)
    directory = tmp_path / "migrations"
    write_all(directory)
    write(directory, "11_broken.py", *BROKEN)
    migrator = Migrator(db, directory)
    with pytest.raises(MigrationError, match=r"11_broken up failed .*the database is as it was"):
        migrator.migrate()
    assert "half_done" not in tables(db)  # the DDL of the failed migration was rolled back
    assert users(db) == [(1, "Ann")]  # and its INSERT; earlier migrations stay applied
    assert [s.state for s in migrator.status()] == ["applied"] * 3 + ["pending"]
    db.disconnect()


def test_a_failing_migration_on_mysql_rolls_back_its_data_changes(
    mysql_url: str, tmp_path: Path
) -> None:
    db = socketify.db.connect(mysql_url)
    directory = tmp_path / "migrations"
    write_all(directory)
    write(
        directory,
        "11_broken.py",
        "db.execute(\"INSERT INTO users (id, name) VALUES (2, 'Bob')\")\n"
        "    raise RuntimeError('bug')",
        "pass",
    )
    with pytest.raises(MigrationError, match="except DDL"):
        Migrator(db, directory).migrate()
    assert users(db) == [(1, "Ann")]
    db.disconnect()


def test_status_reports_a_recorded_version_whose_file_is_gone(
    sqlite_url: str, tmp_path: Path
) -> None:
    db = socketify.db.connect(sqlite_url)
    write_all(tmp_path / "m")
    migrator = Migrator(db, tmp_path / "m")
    migrator.migrate()
    (tmp_path / "m" / "10_seed.py").unlink()
    assert [(s.version, s.state) for s in migrator.status()][-1] == (10, "missing")
    with pytest.raises(MigrationError, match="version 10 is applied but no longer known"):
        migrator.rollback()


def test_registered_migrations_join_the_files_in_version_order(
    sqlite_url: str, tmp_path: Path
) -> None:
    db = socketify.db.connect(sqlite_url)
    write_all(tmp_path / "m")
    migrator = Migrator(db, tmp_path / "m")
    calls: list[str] = []

    def up(db: Any) -> None:
        calls.append("up")
        db.execute("CREATE TABLE flags (id INTEGER PRIMARY KEY, name VARCHAR(40))")

    def down(db: Any) -> None:
        calls.append("down")
        db.execute("DROP TABLE flags")

    migrator.register(5, "flags", up, down)
    labels = ["1_create_users", "2_add_email", "0005_flags", "10_seed"]
    assert [m.label for m in migrator.migrate()] == labels
    assert "flags" in tables(db) and calls == ["up"]
    assert [m.label for m in migrator.rollback(2)] == ["10_seed", "0005_flags"]
    assert "flags" not in tables(db) and calls == ["up", "down"]
    assert [(s.version, s.state) for s in migrator.status()][2] == (5, "pending")
    db.disconnect()


def test_a_registered_migration_needs_no_folder_and_fails_atomically(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url)
    migrator = Migrator(db)

    def broken(db: Any) -> None:
        db.execute("CREATE TABLE half_done (id INTEGER PRIMARY KEY)")
        raise RuntimeError("migration bug")

    migrator.register(20260720, "seed_flag", broken, lambda db: None)
    with pytest.raises(MigrationError, match=r"20260720_seed_flag up failed .*as it was"):
        migrator.migrate()
    assert "half_done" not in tables(db)
    assert [s.state for s in migrator.status()] == ["pending"]
    with pytest.raises(MigrationError, match="no migrations folder"):
        migrator.new("more")
    db.disconnect()


@pytest.mark.parametrize(
    ("version", "name", "error"),
    [
        (-1, "x", "non-negative integer"),
        ("3", "x", "non-negative integer"),
        (True, "x", "non-negative integer"),
        (3, "no spaces", "invalid migration name"),
        (4, "twice", "already registered"),
    ],
)
def test_bad_registrations_are_refused(version: Any, name: str, error: str) -> None:
    migrator = Migrator(None)
    migrator.register(4, "twice", print, print)
    with pytest.raises(MigrationError, match=error):
        migrator.register(version, name, print, print)


def test_a_registered_version_that_a_file_also_has_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "0003_file.py", "pass", "pass")
    migrator = Migrator(None, tmp_path)
    migrator.register(3, "code", print, print)
    with pytest.raises(MigrationError, match="two migrations have version 3: 0003_file"):
        migrator.discover()


@pytest.mark.parametrize(
    ("files", "error"),
    [
        (["1_a.py", "01_b.py"], "two migrations have version 1"),
        (["notes.py"], "named NNNN_name.py"),
    ],
)
def test_bad_migration_folders_are_refused(tmp_path: Path, files: list[str], error: str) -> None:
    for name in files:
        write(tmp_path, name, "pass", "pass")
    with pytest.raises(MigrationError, match=error):
        Migrator(None, tmp_path).discover()


def test_new_writes_the_next_version_from_a_template(tmp_path: Path) -> None:
    migrator = Migrator(None, tmp_path / "migrations")
    first = migrator.new("Create users")
    second = migrator.new("add-email")
    assert (first.name, second.name) == ("0001_create_users.py", "0002_add_email.py")
    assert "def up(db)" in second.read_text() and "def down(db)" in second.read_text()


# -- the command ---------------------------------------------------------------------------------


def write_app(root: Path, url: str) -> None:
    """An app module with a Pony entity whose table only migrations create."""
    (root / "shop_app.py").write_text(
        textwrap.dedent(
            f"""
            from pony.orm import Required
            import socketify.db
            from socketify import Server

            server = Server()
            db = socketify.db.connect({url!r})

            class User(db.Entity):
                _table_ = "users"
                name = Required(str)

            db.generate_mapping()  # checks tables, except under `socketify db`
            """
        )
    )
    write_all(root / "migrations")


@pytest.fixture
def app_dir(tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    write_app(tmp_path, sqlite_url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SOCKETIFY_DB_MIGRATING", raising=False)
    yield tmp_path
    sys.modules.pop("shop_app", None)


def test_command_migrate_status_rollback(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--app", "shop_app:server"]) == 0
    assert "3 migration(s) applied" in capsys.readouterr().out
    assert main(["status", "--app", "shop_app:server"]) == 0
    status = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in status] == [
        ["applied", "1", "create_users"],
        ["applied", "2", "add_email"],
        ["applied", "10", "seed"],
    ]
    assert main(["rollback", "2", "--app", "shop_app"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "rolled back  10_seed",
        "rolled back  2_add_email",
    ]
    # Tables are left to migrations only while the command imports the app: an app imported
    # later in the same process (a test run, a notebook) creates its tables again.
    assert "SOCKETIFY_DB_MIGRATING" not in os.environ


def test_the_command_sees_the_migrations_the_app_registers_in_code(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (app_dir / "shop_app.py").open("a") as app:
        app.write(
            textwrap.dedent(
                """
                from socketify.db.migrations import Migrator

                migrator = Migrator(db)
                migrator.register(
                    5,
                    "flags",
                    lambda db: db.execute("CREATE TABLE flags (name VARCHAR(20))"),
                    lambda db: db.execute("DROP TABLE flags"),
                )
                """
            )
        )
    assert main(["migrate", "--app", "shop_app:server"]) == 0
    assert "applied  0005_flags" in capsys.readouterr().out
    assert main(["status", "--app", "shop_app:server"]) == 0
    status = [line.split()[:3] for line in capsys.readouterr().out.splitlines()]
    assert status[2] == ["applied", "5", "flags"]
    assert main(["rollback", "2", "--app", "shop_app"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "rolled back  10_seed",
        "rolled back  0005_flags",
    ]


def test_command_new_creates_the_file_beside_the_app(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "add orders", "--app", "shop_app:server"]) == 0
    assert (app_dir / "migrations" / "0011_add_orders.py").is_file()


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        ([], 2, "a command is required"),
        (["migrate"], 2, "--app module:server is required"),
        (["rollback", "zero", "--app", "x"], 2, "positive number"),
        (["new", "--app", "x"], 2, "new needs a NAME"),
        (["explode", "--app", "x"], 2, "invalid choice"),
        (["migrate", "--app", "no_such_module_here"], 1, "cannot import"),
        (["migrate", "--app", "shop_app", "--db", "shop_app:server"], 1, "not a Pony"),
    ],
)
def test_command_errors(
    app_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], status: int, message: str
) -> None:
    assert main(argv) == status
    assert message in capsys.readouterr().err


def test_python_dash_m_runs_the_command(tmp_path: Path, sqlite_url: str) -> None:
    write_app(tmp_path, sqlite_url)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "-m", "socketify.db.cli"]
    done = subprocess.run(
        [*command, "migrate", "--app", "shop_app:server"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "applied  10_seed" in done.stdout
    # The app itself now imports cleanly: its table exists, so generate_mapping's check passes.
    check = subprocess.run(
        [sys.executable, "-c", "import shop_app"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
