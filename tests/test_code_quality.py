"""The tree stays lint-clean and type-clean: ruff and mypy as configured in pyproject.toml.

There is no limit on a module's length: a module holds one concept, however long it is, and
is split by concept, never to fit a number of lines.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

needs_ruff = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed"
)


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


@needs_ruff
def test_ruff_finds_nothing() -> None:
    result = run(
        sys.executable, "-m", "ruff", "check", "socketify", "workers", "tests", "load_tests",
        "examples",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_mypy_finds_nothing() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_ruff
def test_no_private_access_across_modules() -> None:
    # No module reads or writes another object's `_private` names (ruff's SLF001).
    result = run(
        sys.executable, "-m", "ruff", "check", "--select", "SLF001", "socketify", "workers"
    )
    assert result.returncode == 0, result.stdout + result.stderr
