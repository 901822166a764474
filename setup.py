"""Build hook: a wheel compiles the hot modules with mypyc when it can, else stays pure Python.

The metadata lives in pyproject.toml; this file only decides on the extension modules. The
compiled modules come from the same source as the pure ones (see `socketify/compiled.py`),
so a build that cannot compile them loses speed, never behaviour: every failure below ends
in a one-line notice and a pure-Python package.

- `SOCKETIFY_COMPILE=0` forces the pure-Python build.
- An editable install (`pip install -e .`) is always pure Python, so an edit takes effect
  without a rebuild.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
# Only these commands build binaries. pip runs this file for metadata too (egg_info,
# dist_info), and an editable install runs `editable_wheel`: neither compiles.
BUILD_COMMANDS = {"bdist_wheel", "build", "build_ext", "install"}
NOTICE = "socketify: building pure Python ({}); set SOCKETIFY_COMPILE=0 to silence this"


def _notice(reason: str) -> None:
    print(NOTICE.format(reason), file=sys.stderr)


def _hot_modules() -> tuple[str, ...]:
    """`HOT_MODULES`, read from the package's own list without importing the package."""
    namespace: dict[str, Any] = {}
    source = HERE / "socketify" / "compiled.py"
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    return namespace["HOT_MODULES"]


def _extensions() -> list[Any]:
    if os.environ.get("SOCKETIFY_COMPILE", "1") == "0":
        return []
    if not BUILD_COMMANDS.intersection(sys.argv[1:]):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _notice("mypyc is not installed")
        return []
    try:
        # The tree is clean under mypy; pyproject.toml's [tool.mypy] is the configuration.
        return mypycify(list(_hot_modules()), opt_level="3", verbose=False)
    except (Exception, SystemExit) as error:  # mypyc exits on a type error: still install
        _notice(f"mypyc failed: {error!r}")
        return []


class OptionalBuildExt(build_ext):
    """Compile the extensions if a C compiler works; otherwise ship the pure-Python modules."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:
            _notice(f"no working C compiler: {error}")
            # A shim module without the shared library it loads would fail on import.
            for extension in self.extensions:
                Path(self.get_ext_fullpath(extension.name)).unlink(missing_ok=True)
            self.extensions = []

    def get_outputs(self) -> list[str]:
        return super().get_outputs() if self.extensions else []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
