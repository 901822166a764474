"""The `launch` fixture: real masters of the `workers` package, without socketify."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workers.master_process import MasterProcess, StartMaster

RUN_MASTER = Path(__file__).with_name("run_master.py")
BOOT_TIMEOUT = 15.0


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[StartMaster]:
    """Start ``run_master.py`` with the given options; by default wait until it is ready.

    Every master started is killed, with its workers, at teardown.
    """
    started: list[MasterProcess] = []

    def _launch(*args: str, version: str = "v1", wait_ready: bool = True) -> MasterProcess:
        index = len(started)
        version_file = tmp_path / f"version-{index}"
        version_file.write_text(version)
        stderr_path = tmp_path / f"stderr-{index}.txt"
        env = dict(os.environ, FAKE_APP_VERSION_FILE=str(version_file), PYTHONUNBUFFERED="1")
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(RUN_MASTER), *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=tmp_path,
                text=True,
                start_new_session=True,  # keep test-runner Ctrl-C away from the master
            )
        master = MasterProcess(proc, stderr_path, version_file)
        started.append(master)
        if wait_ready:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], BOOT_TIMEOUT)
            line = proc.stdout.readline() if ready else ""
            if not line:
                pytest.fail(f"master did not become ready:\n{master.stderr()}")
            master.report = json.loads(line)
            master.known_workers.update(master.report["workers"])
        return master

    yield _launch
    for master in started:
        master.destroy()
