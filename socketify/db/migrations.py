"""Versioned migrations for a socketify Database: `migrations/0001_create_users.py`, up and down.

Theory of operation. A migration is a module named `<version>_<name>.py` (the version is an
integer, usually zero-padded) with `up(db)` and `down(db)`, written with raw SQL through
`db.execute(...)` or with Pony; or the same two functions registered in code with
`Migrator.register(version, name, up, down)`, for an app that ships its schema inside its
own module. Files and registered migrations form one list and apply in ascending version
order — the number, not the order files were written or registered — each inside its own
transaction together with the row that records it in `socketify_migrations`, so a migration
that fails leaves the database as it was and unrecorded. `rollback(n)` undoes the n highest
applied versions, newest first, each in its own transaction. The version is the table's
primary key: two processes racing to apply the same migration cannot both record it; the
loser rolls back.

MySQL and MariaDB commit DDL statements implicitly, so there a failing migration keeps the
DDL that ran before the failure; SQLite and PostgreSQL roll it back.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from pony.orm import db_session

__all__ = [
    "TABLE",
    "Migration",
    "MigrationError",
    "MigrationStatus",
    "MigrationSteps",
    "Migrator",
]

TABLE = "socketify_migrations"
_FILENAME = re.compile(r"(\d+)_(\w+)\.py")
_NAME = re.compile(r"\w+")

Step = Callable[[Any], object]

_TEMPLATE = '''"""{title}."""


def up(db):
    """Apply: one statement per db.execute call; write $$ for a literal $ (Pony syntax)."""
    raise NotImplementedError("write this migration: db.execute('CREATE TABLE ...')")


def down(db):
    """Undo exactly what up() did."""
    raise NotImplementedError("write this migration: db.execute('DROP TABLE ...')")
'''


class MigrationError(Exception):
    """A migration could not be found, loaded, applied or rolled back."""


@dataclass(frozen=True)
class Migration:
    """One migration: a file (`path`), or `up` and `down` functions registered in code."""

    version: int
    name: str
    path: Path | None = None
    up: Step | None = None
    down: Step | None = None

    @property
    def label(self) -> str:
        """The file name without `.py`, e.g. `0001_create_users` (the same shape in code)."""
        return self.path.stem if self.path is not None else f"{self.version:04d}_{self.name}"

    def steps(self) -> MigrationSteps:
        """Its `up` and `down` functions (a file is imported afresh for them)."""
        if self.up is not None and self.down is not None:
            return MigrationSteps(self.up, self.down)
        module = self.load()
        return MigrationSteps(module.up, module.down)

    def load(self) -> ModuleType:
        """Import the migration module (fresh each time); only for a migration file."""
        if self.path is None:
            raise MigrationError(f"{self.label} was registered in code and has no file")
        spec = importlib.util.spec_from_file_location(f"_migration_{self.label}", self.path)
        if spec is None or spec.loader is None:
            raise MigrationError(f"cannot load {self.path}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise MigrationError(f"{self.path.name} does not import: {exc}") from exc
        for step in ("up", "down"):
            if not callable(getattr(module, step, None)):
                raise MigrationError(f"{self.path.name} has no {step}(db) function")
        return module


class MigrationSteps(NamedTuple):
    """What a migration does and how it is undone."""

    up: Step
    down: Step


@dataclass(frozen=True)
class MigrationStatus:
    """Where one version stands: applied (when) or pending; `missing` if it is known no more."""

    version: int
    name: str
    applied_at: str | None
    missing: bool = False

    @property
    def state(self) -> str:
        """ "applied", "pending" or "missing"."""
        if self.missing:
            return "missing"
        return "applied" if self.applied_at else "pending"


class Migrator:
    """Applies, rolls back and reports the migrations in `directory` and those registered."""

    def __init__(self, db: Any, directory: str | Path | None = None) -> None:
        self.db = db
        self.directory = Path(directory) if directory is not None else None
        self._registered: dict[int, Migration] = {}

    # -- the list of migrations ----------------------------------------------------------------

    def register(self, version: int, name: str, up: Step, down: Step) -> Migration:
        """Add a migration written in code: `up(db)` applies it, `down(db)` undoes it."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise MigrationError(f"a migration version is a non-negative integer, not {version!r}")
        if not _NAME.fullmatch(name):
            raise MigrationError(f"invalid migration name {name!r} (letters, digits and _)")
        if not (callable(up) and callable(down)):
            raise MigrationError(f"migration {version} needs callable up and down functions")
        if version in self._registered:
            raise MigrationError(f"version {version} is already registered")
        migration = Migration(version, name, up=up, down=down)
        self._registered[version] = migration
        return migration

    def registered(self) -> list[Migration]:
        """The migrations registered in code, by ascending version."""
        return [self._registered[version] for version in sorted(self._registered)]

    def discover(self) -> list[Migration]:
        """Files and registered migrations, by ascending version; duplicates are errors."""
        found = self._files()
        for version, migration in self._registered.items():
            if version in found:
                raise MigrationError(
                    f"two migrations have version {version}: {found[version].label} "
                    f"and {migration.label} (registered)"
                )
            found[version] = migration
        return [found[version] for version in sorted(found)]

    def _files(self) -> dict[int, Migration]:
        if self.directory is None or not self.directory.is_dir():
            return {}
        found: dict[int, Migration] = {}
        for path in sorted(self.directory.glob("*.py")):
            if path.name.startswith("_"):
                continue  # __init__.py, helpers
            match = _FILENAME.fullmatch(path.name)
            if match is None:
                raise MigrationError(f"{path.name}: migration files are named NNNN_name.py")
            version = int(match.group(1))
            if version in found:
                raise MigrationError(
                    f"two migrations have version {version}: {found[version].label}.py "
                    f"and {path.name}"
                )
            found[version] = Migration(version, match.group(2), path)
        return found

    def new(self, name: str) -> Path:
        """Write `<next version>_<name>.py` from a template; returns its path."""
        if self.directory is None:
            raise MigrationError("this migrator has no migrations folder to write to")
        slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        if not slug:
            raise MigrationError(f"invalid migration name {name!r}")
        existing = self.discover()
        version = existing[-1].version + 1 if existing else 1
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{version:04d}_{slug}.py"
        path.write_text(_TEMPLATE.format(title=name.strip().capitalize()))
        return path

    # -- the database --------------------------------------------------------------------------

    def _ensure_table(self) -> None:
        with db_session(ddl=True):
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} ("
                "version BIGINT NOT NULL PRIMARY KEY, "
                "name VARCHAR(200) NOT NULL, "
                "applied_at VARCHAR(40) NOT NULL)"
            )

    def applied(self) -> dict[int, tuple[str, str]]:
        """Applied versions: version -> (name, applied_at)."""
        self._ensure_table()
        with db_session:
            rows = self.db.select(f"SELECT version, name, applied_at FROM {TABLE}")
        return {int(version): (name, applied_at) for version, name, applied_at in rows}

    def status(self) -> list[MigrationStatus]:
        """Every known version, files and database together, by ascending version."""
        applied = self.applied()
        rows = {
            m.version: MigrationStatus(m.version, m.name, applied.get(m.version, ("", None))[1])
            for m in self.discover()
        }
        for version, (name, applied_at) in applied.items():
            if version not in rows:
                rows[version] = MigrationStatus(version, name, applied_at, missing=True)
        return [rows[version] for version in sorted(rows)]

    def pending(self) -> list[Migration]:
        """Migrations not applied yet, in the order `migrate` applies them."""
        applied = self.applied()
        return [m for m in self.discover() if m.version not in applied]

    def migrate(self) -> list[Migration]:
        """Apply every pending migration; returns those applied. Stops at the first failure."""
        done = []
        for migration in self.pending():
            self._run(migration, "up")
            done.append(migration)
        return done

    def rollback(self, steps: int = 1) -> list[Migration]:
        """Undo the `steps` highest applied versions, newest first; returns those undone."""
        if steps < 1:
            raise MigrationError("rollback needs a positive number of steps")
        files = {m.version: m for m in self.discover()}
        done = []
        for version in sorted(self.applied(), reverse=True)[:steps]:
            migration = files.get(version)
            if migration is None:
                raise MigrationError(f"version {version} is applied but no longer known")
            self._run(migration, "down")
            done.append(migration)
        return done

    def _run(self, migration: Migration, step: str) -> None:
        steps = migration.steps()
        try:
            with db_session(ddl=True):
                (steps.up if step == "up" else steps.down)(self.db)
                if step == "up":
                    self.db.execute(
                        f"INSERT INTO {TABLE} (version, name, applied_at) "
                        "VALUES ($version, $name, $applied_at)",
                        {},
                        {
                            "version": migration.version,
                            "name": migration.name,
                            "applied_at": datetime.now(UTC).isoformat(timespec="microseconds"),
                        },
                    )
                else:
                    self.db.execute(
                        f"DELETE FROM {TABLE} WHERE version = $version",
                        {},
                        {"version": migration.version},
                    )
        except Exception as exc:
            if getattr(self.db, "dialect", "") == "mysql":
                outcome = "rolled back, except DDL (MySQL commits DDL implicitly)"
            else:
                outcome = "rolled back; the database is as it was"
            raise MigrationError(f"{migration.label} {step} failed ({outcome}): {exc}") from exc
