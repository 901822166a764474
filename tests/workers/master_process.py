"""A real master of the `workers` package under test: `run_master.py` running `fake_app.py`.

The `launch` fixture (conftest.py) starts one and reads the JSON line it prints once every
worker is ready; `MasterProcess` talks HTTP to it and watches its processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.processes import child_pids, is_alive
from tests.support.raw_client import Address, WireResponse, get
from tests.support.wait import wait_for

__all__ = ["MasterProcess", "StartMaster"]


@dataclass
class MasterProcess:
    """A running ``run_master.py`` subprocess."""

    proc: subprocess.Popen[str]
    stderr_path: Path
    version_file: Path
    report: dict[str, Any] = field(default_factory=dict)
    known_workers: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        """The master's pid."""
        return self.proc.pid

    @property
    def address(self) -> Address:
        """The first bound address."""
        first = self.report["addresses"][0]
        return first if isinstance(first, str) else (first[0], int(first[1]))

    def get(self, path: str = "/", timeout: float = 5.0) -> WireResponse:
        """GET ``path`` on the first address, on a fresh connection."""
        return get(self.address, path, timeout)

    def signal(self, signum: int) -> None:
        """Send a signal to the master."""
        os.kill(self.pid, signum)

    def workers(self) -> list[int]:
        """Current live worker pids (remembered for cleanup)."""
        pids = child_pids(self.pid)
        self.known_workers.update(pids)
        return pids

    def wait_workers(self, predicate: Callable[[list[int]], bool], timeout: float) -> list[int]:
        """Poll the worker pids until ``predicate(pids)`` holds; returns those pids."""
        found: list[int] = []

        def check() -> bool:
            nonlocal found
            found = self.workers()
            return predicate(found)

        wait_for(check, timeout, message=f"workers {predicate}")
        return found

    def stderr(self) -> str:
        """Everything the master and its workers wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def wait_exit(self, timeout: float) -> int:
        """Wait for the master to exit; returns its exit code."""
        return self.proc.wait(timeout)

    def destroy(self) -> None:
        """Kill whatever is left of this master and its workers."""
        self.workers()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        for pid in self.known_workers:
            if is_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


StartMaster = Callable[..., MasterProcess]
