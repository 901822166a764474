"""The documentation site, built once for the tests that read it or open it in a browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from socketify.compiled import compiled_modules
from tests.docs.fences import DOCS


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `mkdocs build --strict` writes it (a warning fails the build)."""
    if compiled_modules():
        # The site is built from the source. Beside extension modules, the API reference's
        # reader imports them instead of reading their source, and sees no type aliases.
        pytest.skip("the docs site is built from the source; this tree runs compiled modules")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=DOCS.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=110,
    )
    assert result.returncode == 0, result.stderr
    return out
