"""Import rules: the master stays free of gevent/asyncio/futures; workers never import socketify."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import workers

pytestmark = pytest.mark.timeout(30)

PACKAGE_DIR = Path(workers.__file__).parent


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)


def test_master_imports_no_gevent_asyncio_or_concurrent() -> None:
    result = run_python(
        "import workers.supervise.master, sys; "
        "bad = sorted(m for m in sys.modules "
        "if m.split('.')[0] in {'gevent', 'asyncio', 'concurrent'}); "
        "assert not bad, bad"
    )
    assert result.returncode == 0, result.stderr


def test_no_workers_module_imports_socketify_at_runtime() -> None:
    modules = sorted(f"workers.{path.stem}" for path in PACKAGE_DIR.glob("*.py"))
    result = run_python(
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'socketify')\n"
        "assert not bad, bad\n"
    )
    assert result.returncode == 0, result.stderr


def test_no_workers_source_mentions_a_socketify_import() -> None:
    offenders = []
    for path in PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "socketify"]
    assert not offenders
