"""Import rules of the master: it stays free of gevent, asyncio and concurrent.futures.

(That `workers` never imports socketify is checked with the other layers, in
tests/test_import_layering.py.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(30)


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
