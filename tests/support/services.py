"""Tests that need a real server (PostgreSQL, MariaDB, Redis...) or its driver call these first.

    from tests.support.services import require_module, require_service

    def test_something() -> None:
        require_service("PostgreSQL", "127.0.0.1", 5432)
        psycopg2 = require_module("psycopg2", "pip install psycopg2-binary")

Locally a missing server, driver or program SKIPS the test with the reason. Under
`SOCKETIFY_REQUIRE_SERVICES=1` (CI sets it) it FAILS instead, so a CI machine that lost a
service cannot pass by skipping everything that needed it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
from types import ModuleType
from typing import NoReturn

import pytest

__all__ = [
    "REQUIRE_ENV",
    "require_module",
    "require_program",
    "require_service",
    "services_required",
    "unavailable",
]

REQUIRE_ENV = "SOCKETIFY_REQUIRE_SERVICES"

# (host, port) -> None when reachable, else the error text; probed once per test session.
_probed: dict[tuple[str, int], str | None] = {}


def services_required() -> bool:
    """Whether a missing service fails the test instead of skipping it."""
    return os.environ.get(REQUIRE_ENV) == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test for `reason`, or fail it when services are required."""
    if services_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


def require_service(name: str, host: str, port: int, timeout: float = 1.0) -> None:
    """Skip (or, when required, fail) the calling test unless `host:port` accepts TCP."""
    key = (host, port)
    if key not in _probed:
        try:
            socket.create_connection(key, timeout=timeout).close()
            _probed[key] = None
        except OSError as exc:
            _probed[key] = f"{exc.__class__.__name__}: {exc}"
    error = _probed[key]
    if error is not None:
        unavailable(f"{name} is not reachable at {host}:{port}: {error}")


def require_module(module: str, install_hint: str = "") -> ModuleType:
    """Import `module` for the calling test, or skip (or, when required, fail) without it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = f"; {install_hint}" if install_hint else ""
        unavailable(f"{module} is not installed ({exc}){hint}")


def require_program(name: str, package: str) -> str:
    """The path of the program `name`, or skip (fail, when required) without it."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (Debian package {package!r})")
    return path
