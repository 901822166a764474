"""`socketify db migrate | rollback [N] | status | new NAME --app module:server [--db module:attr]`.

The database is found through the app: the `db` attribute of the app's module, or whatever
`--db module:attr` names. Migrations live in `migrations/` beside the app's module unless
`--dir` says otherwise; the migrations that the module's own `Migrator`s on the same database
registered in code join them. While the app is imported, `SOCKETIFY_DB_MIGRATING=1` tells
`Database.generate_mapping` to leave tables alone (they are what is being migrated).

Exit status: 0 done, 1 a migration or lookup failed, 2 a command line we cannot act on.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from socketify.command_line import Parser, UsageError
from socketify.db.database import MIGRATING_ENV
from socketify.db.migrations import MigrationError, Migrator

__all__ = ["main"]

USAGE = """socketify db migrate | rollback [N] | status | new NAME --app APP [options]

  migrate         apply the migrations not applied yet, oldest first
  rollback [N]    undo the N newest migrations (default 1)
  status          list every migration and when it was applied
  new NAME        write an empty migration file named after NAME"""


def _parser() -> Parser:
    parser = Parser("socketify db", USAGE)
    group = parser.add_argument_group("options")
    add = group.add_argument
    add(
        "command",
        nargs="?",
        choices=["migrate", "rollback", "status", "new"],
        help=argparse.SUPPRESS,
    )
    add("argument", nargs="?", help=argparse.SUPPRESS)
    add("--app", metavar="APP", help="the app whose module has `db` (module[:server])")
    add("--db", dest="db_spec", metavar="module:attr", help="the Database, if not the app's `db`")
    add("--dir", metavar="PATH", help="the migrations folder (default: migrations/ beside the app)")
    add("-h", "--help", action="store_true", help="show this help and exit")
    return parser


def main(argv: list[str]) -> int:
    """Run one `socketify db` command; returns the exit status."""
    try:
        options = _parse(argv)
    except UsageError as exc:
        print(f"error: {exc}\n(see `socketify db --help`)", file=sys.stderr)
        return 2
    if options.help:
        print(_parser().format_help(), end="")
        return 0
    try:
        return _run(options)
    except (MigrationError, _LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _parse(argv: list[str]) -> argparse.Namespace:
    options = _parser().parse_args(argv)
    if options.help:
        return options
    if options.command is None:
        raise UsageError("a command is required")
    if options.command == "new" and not options.argument:
        raise UsageError("new needs a NAME")
    if options.command == "rollback" and options.argument is not None:
        if not options.argument.isdigit() or int(options.argument) < 1:
            raise UsageError(f"rollback takes a positive number, not {options.argument!r}")
    elif options.command in ("migrate", "status") and options.argument is not None:
        raise UsageError(f"{options.command} takes no argument")
    if options.app is None and not (options.command == "new" and options.dir):
        raise UsageError("--app module:server is required")
    return options


class _LookupError(Exception):
    """The app, its database or its migrations folder cannot be found."""


def _import_for_migrations(name: str) -> ModuleType:
    """Import the app with `MIGRATING_ENV` set, and only then: `main()` may run in-process."""
    before = os.environ.get(MIGRATING_ENV)
    os.environ[MIGRATING_ENV] = "1"
    try:
        return _import(name)
    finally:
        if before is None:
            del os.environ[MIGRATING_ENV]
        else:
            os.environ[MIGRATING_ENV] = before


def _run(options: argparse.Namespace) -> int:
    if options.command == "new" and options.app is None:
        path = Migrator(None, options.dir).new(options.argument)
        print(f"created {path}")
        return 0
    app_module = _import_for_migrations(options.app.partition(":")[0])
    directory = Path(options.dir) if options.dir else _beside(app_module) / "migrations"
    if options.command == "new":
        print(f"created {Migrator(None, directory).new(options.argument)}")
        return 0
    migrator = Migrator(_find_db(app_module, options.db_spec), directory)
    _adopt_registered(migrator, app_module)
    if options.command == "migrate":
        done = migrator.migrate()
        for migration in done:
            print(f"applied  {migration.label}")
        print(f"{len(done)} migration(s) applied" if done else "nothing to migrate")
    elif options.command == "rollback":
        for migration in migrator.rollback(int(options.argument or 1)):
            print(f"rolled back  {migration.label}")
    else:
        for row in migrator.status():
            when = f"  {row.applied_at}" if row.applied_at else ""
            print(f"{row.state:<8} {row.version:>5}  {row.name}{when}")
    return 0


def _adopt_registered(migrator: Migrator, app_module: ModuleType) -> None:
    """Add the migrations that the app's own migrators (module attributes on the same
    database) registered in code, so that the command sees the app's whole list."""
    for value in vars(app_module).values():
        if isinstance(value, Migrator) and value.db is migrator.db:
            for migration in value.registered():
                migrator.register(migration.version, migration.name, *migration.steps())


def _import(module_name: str) -> ModuleType:
    if not module_name:
        raise _LookupError("--app needs a module name, e.g. --app myapp:server")
    if "" not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: the working directory is importable
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise _LookupError(f"cannot import {module_name!r}: {exc}") from exc


def _beside(module: ModuleType) -> Path:
    if module.__file__ is None:
        raise _LookupError(f"{module.__name__} has no file; pass --dir")
    return Path(module.__file__).resolve().parent


def _find_db(app_module: ModuleType, spec: str | None) -> Any:
    from pony.orm import Database

    if spec:
        module_name, _, attribute = spec.partition(":")
        owner: Any = _import(module_name)
        attribute = attribute or "db"
    else:
        owner, attribute = app_module, "db"
    target: Any = owner
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if not isinstance(target, Database):
        where = spec or f"{app_module.__name__}:db"
        raise _LookupError(f"{where} is not a Pony/socketify.db Database (pass --db module:attr)")
    return target


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
