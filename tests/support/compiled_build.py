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
from collections.abc import Mapping
from pathlib import Path

from tests.support.serve import REPO

__all__ = ["build_wheel", "compiled_members", "copy_tracked_files", "lay_compiled_tree"]

BUILD_TIMEOUT = 1800  # mypyc and the C compiler on a busy 2-core machine
# Installed, not tracked: the copy uses the same peers as the checkout.
INSTALLED = ("load_tests/.venv", "load_tests/.peers")


def copy_tracked_files(dest: Path) -> None:
    """Copy the files git tracks (as they are in the working tree) to `dest`."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)


def build_wheel(source: Path, out: Path, env: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """Build the wheel of `source` into `out` as pip does; return it and the build's stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--wheel-dir", out, "."],
        cwd=source, env={**os.environ, **(env or {})}, capture_output=True, text=True,
        timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = out.glob("socketify_gevent-*.whl")
    return wheel, result.stdout + result.stderr


def compiled_members(wheel: Path) -> list[str]:
    """The extension modules in a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        return [name for name in archive.namelist() if name.endswith(".so")]


def lay_compiled_tree(dest: Path) -> list[str]:
    """Copy the tracked files to `dest`, add the compiled wheel's extension modules, and
    return their paths (empty when the build fell back to pure Python)."""
    copy_tracked_files(dest)
    with tempfile.TemporaryDirectory(prefix="socketify-wheel-") as out:
        wheel, _ = build_wheel(dest, Path(out), {"SOCKETIFY_COMPILE": "1"})
        compiled = compiled_members(wheel)
        with zipfile.ZipFile(wheel) as archive:
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
