"""The tree stays lint-clean and type-clean: ruff and mypy as configured in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", "socketify", "workers", "load_tests")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_mypy_finds_nothing() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_module_over_500_lines() -> None:
    too_long = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in [*ROOT.glob("socketify/**/*.py"), *ROOT.glob("workers/**/*.py")]
        if (count := len(path.read_text().splitlines())) > 500
    ]
    assert not too_long
