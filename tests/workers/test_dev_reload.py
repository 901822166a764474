"""Development auto-reload: mtime polling, and a real master reloading on a source change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.wait import wait_for
from tests.workers.master_process import StartMaster
from workers.supervise.reloader import MtimeWatcher


def touch(path: Path, content: str, bump: int) -> None:
    path.write_text(content)
    stat = path.stat()
    # Move the mtime forward explicitly: coarse file-system clocks could hide a quick edit.
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


@pytest.mark.timeout(10)
def test_watcher_reports_added_modified_and_removed_python_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a = 1")
    (tmp_path / "notes.txt").write_text("ignored")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    watcher = MtimeWatcher([str(tmp_path)])
    assert watcher.changed() == []
    touch(tmp_path / "a.py", "a = 2", bump=1)
    (tmp_path / "b.py").write_text("b = 1")
    (cache / "c.py").write_text("")
    (tmp_path / "notes.txt").write_text("still ignored")
    assert watcher.changed() == [str(tmp_path / "a.py"), str(tmp_path / "b.py")]
    (tmp_path / "b.py").unlink()
    assert watcher.changed() == [str(tmp_path / "b.py")]
    assert watcher.changed() == []


@pytest.mark.timeout(25)
def test_master_with_reload_serves_new_code_after_a_source_change(
    launch: StartMaster, tmp_path: Path
) -> None:
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    module = source_dir / "app_module.py"
    module.write_text("VALUE = 1\n")
    master = launch("--workers", "2", "--reload-dir", str(source_dir))
    old_workers = set(master.workers())
    assert master.get("/version").text == "v1"
    master.version_file.write_text("v2")
    touch(module, "VALUE = 2\n", bump=2)
    wait_for(lambda: master.get("/version").text == "v2", timeout=10, interval=0.1)
    wait_for(lambda: not old_workers & set(master.workers()), timeout=10)
    assert "changed" in master.stderr()
