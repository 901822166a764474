"""Development auto-reload: notice edits to ``*.py`` files by polling modification times.

Polling is dependency-free and works on every file system (bind mounts, network shares) where
inotify sometimes does not; one scan a second is cheap for a project-sized tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["MtimeWatcher"]

SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "venv", "site-packages", "build", "dist"})


class MtimeWatcher:
    """Remembers the mtimes of ``*.py`` files under some directories and reports changes."""

    def __init__(self, dirs: Iterable[str] = ()) -> None:
        self.dirs = [os.path.abspath(d) for d in dirs] or [os.getcwd()]
        self._mtimes = self._scan()

    def _scan(self) -> dict[str, int]:
        mtimes: dict[str, int] = {}
        for top in self.dirs:
            for root, dirnames, filenames in os.walk(top):
                # Hidden folders (.git, .venv, caches) and build output never hold app code.
                dirnames[:] = [
                    d for d in dirnames if not d.startswith(".") and d not in SKIPPED_DIRS
                ]
                for name in filenames:
                    if name.endswith(".py"):
                        path = os.path.join(root, name)
                        try:
                            mtimes[path] = os.stat(path).st_mtime_ns
                        except OSError:
                            continue  # deleted between listing and stat
        return mtimes

    def changed(self) -> list[str]:
        """Paths added, removed or modified since the previous call (or construction)."""
        current = self._scan()
        previous, self._mtimes = self._mtimes, current
        return sorted(
            path
            for path in current.keys() | previous.keys()
            if current.get(path) != previous.get(path)
        )
