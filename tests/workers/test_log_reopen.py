"""Reopening log files after rotation, in-process and through SIGUSR1 on a real master."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.wait import wait_for
from tests.workers.master_process import StartMaster
from workers.supervise.logfiles import file_handlers, reopen_log_files


@pytest.fixture
def rotated_logger(tmp_path: Path) -> Iterator[tuple[logging.Logger, Path]]:
    path = tmp_path / "app.log"
    logger = logging.getLogger("tests.workers.rotation")
    handler = logging.FileHandler(path)
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, path
    logger.removeHandler(handler)
    handler.close()


@pytest.mark.timeout(10)
def test_reopen_writes_to_a_new_file_after_the_old_one_was_moved(
    rotated_logger: tuple[logging.Logger, Path],
) -> None:
    logger, path = rotated_logger
    logger.warning("before rotation")
    path.rename(path.with_suffix(".1"))
    assert reopen_log_files() >= 1
    logger.warning("after rotation")
    assert "after rotation" in path.read_text()
    assert "after rotation" not in path.with_suffix(".1").read_text()
    assert "before rotation" in path.with_suffix(".1").read_text()


@pytest.mark.timeout(10)
def test_file_handlers_are_found_on_named_loggers_once(
    rotated_logger: tuple[logging.Logger, Path],
) -> None:
    logger, _ = rotated_logger
    handler = logger.handlers[0]
    logging.getLogger("tests.workers.other").addHandler(handler)
    try:
        assert [h for h in file_handlers() if h is handler] == [handler]
    finally:
        logging.getLogger("tests.workers.other").removeHandler(handler)


@pytest.mark.timeout(20)
def test_usr1_makes_master_and_workers_reopen_their_log_file(
    launch: StartMaster, tmp_path: Path
) -> None:
    log_file = tmp_path / "server.log"
    master = launch("--workers", "1", "--log-file", str(log_file))
    master.get("/log?msg=before")
    rotated = tmp_path / "server.log.1"
    log_file.rename(rotated)
    master.signal(signal.SIGUSR1)
    wait_for(log_file.exists, timeout=5)

    def worker_logged_to_new_file() -> bool:
        master.get("/log?msg=after")
        return "fake_app says after" in log_file.read_text()

    wait_for(worker_logged_to_new_file, timeout=5, interval=0.1)
    assert "reopened" in log_file.read_text()  # the master's own line
    assert "fake_app says before" in rotated.read_text()
