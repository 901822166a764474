"""A copy of the checkout that runs compiled: the wheel's extension modules beside the sources.

    python -m tests.support.compiled_build DEST     # what CI runs the whole suite in

The wheel is built by pip from the tracked files (so its build is the one users get), and
its extension modules are laid next to the same `.py` files in a copy of those files, where
the import system prefers them. pytest run there tests the compiled build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.support.serve import REPO

__all__ = ["lay_compiled_tree"]

BUILD_TIMEOUT = 1800  # mypyc and the C compiler on a busy 2-core machine
# Installed, not tracked: the copy uses the same peers as the checkout.
INSTALLED = ("load_tests/.venv", "load_tests/.peers")


def lay_compiled_tree(dest: Path) -> list[str]:
    """Copy the tracked files to `dest`, add the compiled wheel's extension modules, and
    return their paths (empty when the build fell back to pure Python)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    with tempfile.TemporaryDirectory(prefix="socketify-wheel-") as out:
        environment = {**os.environ, "SOCKETIFY_COMPILE": "1"}
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", out, dest],
            env=environment, check=True, timeout=BUILD_TIMEOUT,
        )  # fmt: skip
        (wheel,) = Path(out).glob("socketify_gevent-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            compiled = [name for name in archive.namelist() if name.endswith(".so")]
            archive.extractall(dest, members=compiled)
    for name in INSTALLED:
        if (REPO / name).exists():
            (dest / name).symlink_to(REPO / name)
    return compiled


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    if not lay_compiled_tree(Path(sys.argv[1])):
        raise SystemExit("the wheel holds no compiled module: is a C compiler installed?")
