"""Access lines batched per turn of the gevent loop: whole, in order, prompt, never lost."""

from __future__ import annotations

import io
import logging as std_logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest

from socketify.middleware import log_handlers
from socketify.middleware.log_handlers import BATCH_BYTES, AccessLogFileHandler, LineSink
from socketify.testing import TestClient
from tests.support.serve import Launcher
from tests.support.wait import wait_for


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "access.log"


@pytest.fixture
def handler(log_file: Path) -> Iterator[AccessLogFileHandler]:
    made = AccessLogFileHandler(str(log_file))
    yield made
    made.close()


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every os.write the handlers make, recorded (and still performed)."""
    seen: list[bytes] = []
    real_write = os.write

    def recording_write(fd: int, data: bytes) -> int:
        seen.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(log_handlers.os, "write", recording_write)
    return seen


def _logger_to(handler: AccessLogFileHandler, name: str) -> std_logging.Logger:
    """A logger at INFO whose one handler is `handler` (not propagating)."""
    logger = std_logging.getLogger(f"socketify.test.batching.{name}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(std_logging.INFO)
    return logger


def test_lines_of_one_loop_turn_go_out_in_one_write_when_the_greenlet_waits(
    handler: AccessLogFileHandler, log_file: Path, writes: list[bytes]
) -> None:
    def serve_three() -> str:
        for number in range(3):
            handler.write_line(f"line {number}")
        held = log_file.read_text()
        gevent.sleep(0)  # the greenlet waits: the loop turns
        return held

    held = gevent.spawn(serve_three).get(timeout=5)
    assert held == ""  # batched while the greenlet ran
    assert log_file.read_text() == "line 0\nline 1\nline 2\n"
    assert writes == [b"line 0\nline 1\nline 2\n"]


def test_batches_from_several_greenlets_keep_every_line_once(
    handler: AccessLogFileHandler, log_file: Path
) -> None:
    def serve(name: str) -> None:
        for number in range(50):
            handler.write_line(f"{name} {number}")
            gevent.sleep(0)

    gevent.joinall([gevent.spawn(serve, name) for name in "abc"], timeout=5, raise_error=True)
    gevent.sleep(0)
    lines = log_file.read_text().splitlines()
    assert sorted(lines) == sorted(f"{n} {i}" for n in "abc" for i in range(50))
    assert [line for line in lines if line.startswith("a ")] == [f"a {i}" for i in range(50)]


def test_a_full_batch_is_written_at_once_in_whole_lines_of_at_most_pipe_buf(
    handler: AccessLogFileHandler, log_file: Path, writes: list[bytes]
) -> None:
    line = "x" * 99  # 100 bytes with the newline

    def burst() -> int:
        for _ in range(100):
            handler.write_line(line)
        return len(writes)

    written_before_waiting = gevent.spawn(burst).get(timeout=5)
    gevent.sleep(0)
    assert written_before_waiting >= 2  # 10 000 bytes: at least two full batches went out
    assert all(len(data) <= BATCH_BYTES and data.endswith(b"\n") for data in writes)
    assert log_file.read_text() == (line + "\n") * 100


def test_flush_writes_what_is_pending(handler: AccessLogFileHandler, log_file: Path) -> None:
    """logging.shutdown() (what a worker runs on its way out) calls flush()."""

    def log_and_flush() -> str:
        handler.write_line("last words")
        handler.flush()
        return log_file.read_text()

    assert gevent.spawn(log_and_flush).get(timeout=5) == "last words\n"


def test_close_writes_what_is_pending(handler: AccessLogFileHandler, log_file: Path) -> None:
    gevent.spawn(handler.write_line, "before close").get(timeout=5)  # no loop turn yet
    handler.close()
    assert log_file.read_text() == "before close\n"


def test_outside_a_greenlet_each_line_is_written_at_once(
    handler: AccessLogFileHandler, log_file: Path
) -> None:
    handler.write_line("from the main greenlet")
    assert log_file.read_text() == "from the main greenlet\n"
    done: list[str] = []

    def in_a_thread() -> None:
        handler.write_line("thread")
        done.append("ok")

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join(5)
    assert done == ["ok"] and log_file.read_text().endswith("thread\n")


def test_a_line_sink_picks_up_a_formatter_set_after_the_first_line(
    handler: AccessLogFileHandler, log_file: Path
) -> None:
    logger = _logger_to(handler, "formatter")
    sink = LineSink(logger)
    try:
        sink.send(std_logging.INFO, "plain")
        handler.setFormatter(std_logging.Formatter("[%(levelname)s] %(message)s"))
        sink.send(std_logging.WARNING, "formatted")
    finally:
        logger.handlers.clear()
    assert log_file.read_text() == "plain\n[WARNING] formatted\n"


def test_the_real_server_logs_each_request_promptly(serve: Launcher, tmp_path: Path) -> None:
    import urllib.request

    access_log = tmp_path / "served.log"
    args = ("--access-log", str(access_log), "--access-log-format", "dev")
    with serve("tests.middleware.apps.static_app:server", workers=1, args=args) as srv:
        for _ in range(3):
            with urllib.request.urlopen(f"{srv.url}/ping", timeout=5) as response:
                assert response.status == 200
        wait_for(
            lambda: access_log.read_text().count("GET /ping 200") == 3,
            0.5,
            interval=0.01,
            message="three lines in the access log",
        )


def test_a_stream_swapped_for_one_without_a_descriptor_is_written_the_other_way(
    tmp_path: Path,
) -> None:
    """Whether the stream has a descriptor is remembered per stream, not per handler."""
    path = tmp_path / "first.log"
    with open(path, "w", encoding="utf-8") as first:
        handler = log_handlers.AccessLogHandler(first)
        handler.write_line("to the file")
        second = io.StringIO()
        handler.setStream(second)
        handler.write_line("to the string")
    assert path.read_text() == "to the file\n"
    assert second.getvalue() == "to the string\n"


def test_a_batch_that_cannot_be_written_is_reported_not_raised_into_the_hub(
    handler: AccessLogFileHandler, log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[str] = []
    monkeypatch.setattr(handler, "handleError", lambda record: reported.append(record.msg))

    def failing_write(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_handlers.os, "write", failing_write)
    gevent.spawn(handler.write_line, "lost").get(timeout=5)
    gevent.sleep(0)  # the hub's callback runs, and must survive
    assert reported == ["access log lines lost"]
    with pytest.raises(OSError):  # not batched: the error reaches the caller (emit handles it)
        handler.write_line("from the main greenlet")
    with pytest.raises(OSError):  # flush(): the caller is there too
        gevent.spawn(_write_and_flush, handler, "flushed").get(timeout=5)


def _write_and_flush(handler: AccessLogFileHandler, line: str) -> None:
    handler.write_line(line)
    handler.flush()


def test_a_short_write_of_a_batch_is_completed(
    handler: AccessLogFileHandler, log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    sizes: list[int] = []

    def short_write(fd: int, data: bytes) -> int:
        piece = bytes(data[: max(1, len(data) // 2)])
        sizes.append(len(piece))
        return real_write(fd, piece)

    monkeypatch.setattr(log_handlers.os, "write", short_write)

    def two_lines() -> None:
        handler.write_line("first line")
        handler.write_line("second line")

    gevent.spawn(two_lines).get(timeout=5)
    gevent.sleep(0)
    assert log_file.read_text() == "first line\nsecond line\n"
    assert len(sizes) >= 2


def test_batching_survives_gevent_patching_threads_before_the_import() -> None:
    # A script that runs `monkey.patch_all()` first imports us with a patched get_ident,
    # which answers per greenlet: lines of two greenlets must still share one batch.
    import subprocess
    import sys

    script = """
import gevent.monkey
gevent.monkey.patch_all()
import gevent
from socketify.middleware import log_handlers
assert log_handlers.get_ident is gevent.monkey.get_original("_thread", "get_ident")
ids = {gevent.spawn(log_handlers.get_ident).get() for _ in range(3)}
assert len(ids) == 1, ids
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


def _logged_app(handler: AccessLogFileHandler, name: str) -> tuple[std_logging.Logger, TestClient]:
    """A logger writing to `handler` alone at INFO, and a client of an app logging on it."""
    from socketify import Server, logging

    logger = _logger_to(handler, name)
    server = Server(compression=False)
    server.use(logging.middleware(logger=logger))
    server.get("/ok", lambda req, res: res.send("ok\n"))
    return logger, TestClient(server)


def test_access_lines_of_one_loop_turn_share_one_write_through_the_middleware(
    handler: AccessLogFileHandler, log_file: Path, writes: list[bytes]
) -> None:
    logger, client = _logged_app(handler, "mw")

    def serve_five() -> list[int]:
        statuses = [client.get("/ok").status for _ in range(4)] + [client.get("/no").status]
        assert log_file.read_text() == ""  # all batched while the greenlet runs
        return statuses

    try:
        assert gevent.spawn(serve_five).get(timeout=5) == [200, 200, 200, 200, 404]
        gevent.sleep(0)
    finally:
        logger.handlers.clear()
    lines = log_file.read_text().splitlines()
    assert [line.split()[2:4] for line in lines] == [["/ok", "200"]] * 4 + [["/no", "404"]]
    assert len(writes) == 1


def test_a_handler_above_info_gets_no_info_line_from_an_open_batch(
    handler: AccessLogFileHandler, log_file: Path
) -> None:
    logger = _logger_to(handler, "level")
    handler.setLevel(std_logging.WARNING)
    sink = LineSink(logger)

    def mixed() -> None:
        sink.send(std_logging.WARNING, "warned")
        sink.send(std_logging.INFO, "informed")
        sink.send(std_logging.ERROR, "failed")

    try:
        gevent.spawn(mixed).get(timeout=5)
        gevent.sleep(0)
    finally:
        logger.handlers.clear()
    assert log_file.read_text() == "warned\nfailed\n"


def test_a_level_change_applies_from_the_next_loop_turn(
    handler: AccessLogFileHandler, log_file: Path
) -> None:
    logger, client = _logged_app(handler, "turns")

    def one_turn(paths: list[str]) -> None:
        for path in paths:
            client.get(path)

    try:
        gevent.spawn(one_turn, ["/ok", "/ok"]).get(timeout=5)
        gevent.sleep(0)
        logger.setLevel(std_logging.WARNING)
        gevent.spawn(one_turn, ["/ok", "/missing", "/ok"]).get(timeout=5)
        gevent.sleep(0)
        logger.setLevel(std_logging.DEBUG)
        gevent.spawn(one_turn, ["/ok"]).get(timeout=5)
        gevent.sleep(0)
    finally:
        logger.handlers.clear()
    lines = log_file.read_text().splitlines()
    assert [line.split()[2:4] for line in lines] == [
        ["/ok", "200"],
        ["/ok", "200"],
        ["/missing", "404"],
        ["/ok", "200"],
    ]
    assert "rid=" in lines[-1] and "rid=" not in lines[0]
