"""The access-log middleware: formats, levels, real statuses of 404s and errors, escaping."""

from __future__ import annotations

import io
import logging as std_logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from socketify import HTTPError, Server, logging
from socketify.middleware import request_id
from socketify.middleware.log_handlers import AccessLogFileHandler, AccessLogHandler
from socketify.testing import TestClient


class Capture(std_logging.Handler):
    def __init__(self) -> None:
        super().__init__(std_logging.DEBUG)
        self.records: list[std_logging.LogRecord] = []

    def emit(self, record: std_logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def lines(self) -> list[str]:
        return [record.getMessage() for record in self.records]


@pytest.fixture
def capture() -> Iterator[Capture]:
    logger = std_logging.getLogger("socketify.access")
    handler = Capture()
    logger.addHandler(handler)
    old_level, old_propagate = logger.level, logger.propagate
    logger.setLevel(std_logging.INFO)
    logger.propagate = False
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)
    logger.propagate = old_propagate


def app(*middleware: object, trust_proxy: bool = False) -> TestClient:
    server = Server(trust_proxy=trust_proxy)
    for mw in middleware:
        server.use(mw)  # type: ignore[arg-type]

    @server.get("/x")
    def x(req, res):
        res.send("Hello, world!")

    @server.get("/boom")
    def boom(req, res):
        raise RuntimeError("kaboom")

    @server.get("/teapot")
    def teapot(req, res):
        raise HTTPError(418, "short and stout")

    return TestClient(server, remote_addr="127.0.0.1")


def test_dev_format_line_and_level(capture: Capture) -> None:
    app(logging.middleware()).get("/x")
    (record,) = capture.records
    assert record.name == "socketify.access" and record.levelno == std_logging.INFO
    assert re.fullmatch(r"127\.0\.0\.1 GET /x 200 \d+\.\dms 13B", record.getMessage())


def test_404_is_logged_as_404_with_warning(capture: Capture) -> None:
    client = app(logging.middleware())
    assert client.get("/nowhere").status == 404
    (record,) = capture.records
    assert " 404 " in record.getMessage() and record.levelno == std_logging.WARNING
    assert record.getMessage().endswith(" 10B")  # "Not Found\n"


def test_404_from_a_middleware_that_stops_is_logged_as_404(capture: Capture) -> None:
    def stop(req, res, next):
        return None

    assert app(logging.middleware(), stop).get("/x").status == 404
    assert " 404 " in capture.lines[0]


def test_500_is_logged_as_500_with_error_level(capture: Capture) -> None:
    assert app(logging.middleware()).get("/boom").status == 500
    (record,) = [r for r in capture.records if r.name == "socketify.access"]
    assert " 500 " in record.getMessage() and record.levelno == std_logging.ERROR


def test_http_error_status_is_logged(capture: Capture) -> None:
    assert app(logging.middleware()).get("/teapot").status == 418
    assert " 418 " in capture.lines[0]


def test_common_format(capture: Capture) -> None:
    app(logging.middleware(format="common")).get("/x?a=1")
    assert re.fullmatch(
        r"127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000\] "
        r'"GET /x\?a=1 HTTP/1\.1" 200 13',
        capture.lines[0],
    )


def test_json_format_has_request_id(capture: Capture) -> None:
    client = app(request_id(), logging.middleware(format="json"))
    r = client.get("/x", headers={"User-Agent": "pytest"})
    record = orjson.loads(capture.lines[0])
    assert record["status"] == 200 and record["path"] == "/x" and record["bytes"] == 13
    assert record["request_id"] == r.headers["X-Request-Id"]
    assert record["user_agent"] == "pytest" and record["ip"] == "127.0.0.1"


def test_debug_level_appends_request_id_and_cut_user_agent(capture: Capture) -> None:
    std_logging.getLogger("socketify.access").setLevel(std_logging.DEBUG)
    app(request_id(), logging.middleware()).get(
        "/x", headers={"User-Agent": "u" * 50, "X-Request-Id": "abc-123"}
    )
    assert capture.lines[0].endswith(" rid=abc-123 ua=" + "u" * 40 + "...")


def test_control_characters_in_the_path_cannot_forge_lines(capture: Capture) -> None:
    app(logging.middleware()).get("/x%0d%0aGET%20/admin%20200")
    line = capture.lines[0]
    assert "\n" not in line and "\r" not in line and "\\x0d\\x0a" in line


def test_a_quote_or_an_encoded_control_character_in_the_path_is_escaped(
    capture: Capture,
) -> None:
    client = app(logging.middleware())
    client.get('/x"y')  # the parser lets a raw quote through
    client.get("/x%22y%7f")
    client.get("/plain/x")
    assert capture.lines[0].split()[2] == '/x\\"y'
    assert capture.lines[1].split()[2] == '/x\\"y\\x7f'
    assert capture.lines[2].split()[2] == "/plain/x"


def test_trust_proxy_uses_forwarded_address(capture: Capture) -> None:
    client = app(logging.middleware(trust_proxy=True))
    client.get("/x", headers={"X-Forwarded-For": "203.0.113.9, 10.0.0.2"})
    assert capture.lines[0].startswith("203.0.113.9 GET")
    untrusted = app(logging.middleware())
    untrusted.get("/x", headers={"X-Forwarded-For": "203.0.113.9"})
    assert capture.lines[1].startswith("127.0.0.1 GET")


def test_nothing_is_formatted_when_the_logger_is_off(capture: Capture) -> None:
    std_logging.getLogger("socketify.access").setLevel(std_logging.ERROR)
    app(logging.middleware()).get("/x")
    assert capture.records == []


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="format"):
        logging.middleware(format="fancy")


# -- the records and the one-write handlers -------------------------------------------------


def test_records_are_complete_log_records(capture: Capture) -> None:
    app(logging.middleware()).get("/x")
    (record,) = capture.records
    formatted = std_logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"
    ).format(record)
    assert " INFO socketify.access " in formatted and formatted.endswith(" 13B")
    assert abs(record.created - __import__("time").time()) < 5


def test_records_made_after_a_fork_carry_the_childs_pid(capture: Capture) -> None:
    client = app(logging.middleware())
    client.get("/x")  # the template is built in the parent first
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: log one request and report the record's pid
        try:
            client.get("/x")
            os.write(write_end, f"{capture.records[-1].process} {os.getpid()}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    record_pid, child_pid = os.read(read_end, 100).decode().split()
    os.close(read_end)
    assert record_pid == child_pid


def test_a_custom_record_factory_is_respected(capture: Capture) -> None:
    original = std_logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = original(*args, **kwargs)
        record.tenant = "acme"
        return record

    std_logging.setLogRecordFactory(factory)
    try:
        app(logging.middleware()).get("/x")
    finally:
        std_logging.setLogRecordFactory(original)
    assert capture.records[0].tenant == "acme"  # type: ignore[attr-defined]


def test_access_log_file_handler_writes_whole_lines_and_reopens(tmp_path: Path) -> None:
    from workers.supervise.logfiles import reopen_log_files

    path = tmp_path / "access.log"
    handler = AccessLogFileHandler(str(path))
    logger = std_logging.getLogger("socketify.test.access")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(std_logging.INFO)
    try:
        logger.info("first line")
        path.rename(tmp_path / "access.log.1")  # logrotate
        assert reopen_log_files() >= 1
        logger.info("second line \u00e9")
    finally:
        logger.handlers.clear()
        handler.close()
    assert (tmp_path / "access.log.1").read_text() == "first line\n"
    assert path.read_text(encoding="utf-8") == "second line \u00e9\n"


def test_access_log_handler_uses_a_formatter_when_set() -> None:
    stream = io.StringIO()  # no descriptor: the write + flush fallback
    handler = AccessLogHandler(stream)
    handler.setFormatter(std_logging.Formatter("[%(levelname)s] %(message)s"))
    record = std_logging.LogRecord("a", std_logging.WARNING, "", 0, "hello %s", ("you",), None)
    handler.handle(record)
    assert stream.getvalue() == "[WARNING] hello you\n"


def test_access_log_handler_writes_to_a_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    with open(path, "w", encoding="utf-8") as stream:
        handler = AccessLogHandler(stream)
        handler.handle(std_logging.LogRecord("a", std_logging.INFO, "", 0, "line", (), None))
    assert path.read_text() == "line\n"


def test_lines_go_straight_to_one_write_handlers_respecting_their_level() -> None:
    logger = std_logging.getLogger("socketify.test.direct")
    everything, errors_only = io.StringIO(), io.StringIO()
    loud = AccessLogHandler(everything)
    quiet = AccessLogHandler(errors_only)
    quiet.setLevel(std_logging.ERROR)
    logger.handlers[:] = [loud, quiet]
    logger.propagate = False
    logger.setLevel(std_logging.INFO)
    try:
        client = app(logging.middleware(logger=logger))
        client.get("/x")
        client.get("/boom")
    finally:
        logger.handlers.clear()
    lines = everything.getvalue().splitlines()
    assert len(lines) == 2 and " 200 " in lines[0] and " 500 " in lines[1]
    assert errors_only.getvalue().splitlines() == lines[1:]


def test_an_http_error_with_an_odd_status_is_logged_as_raised(caplog) -> None:
    server = Server()
    server.use(logging.middleware())

    @server.get("/odd")
    def odd(req, res):
        raise HTTPError(1000, "odd")

    with caplog.at_level("INFO", logger="socketify.access"):
        TestClient(server).get("/odd")
    assert any(" /odd 1000 " in record.getMessage() for record in caplog.records)


def test_the_dev_line_shows_the_decoded_path_and_the_plain_one_as_sent(capture: Capture) -> None:
    client = app(logging.middleware())
    client.get("/caf%C3%A9")
    client.get("/x")
    assert " GET /café 404 " in capture.lines[0]
    assert " GET /x 200 " in capture.lines[1]


def test_level_changes_after_the_first_request_are_obeyed(capture: Capture) -> None:
    """The middleware reads logging's cached answers; setLevel and disabled still count."""
    logger = std_logging.getLogger("socketify.access")
    client = app(logging.middleware())
    client.get("/x")
    logger.setLevel(std_logging.WARNING)
    client.get("/x")  # INFO: not logged now
    client.get("/nowhere")  # WARNING: logged
    logger.disabled = True
    try:
        client.get("/nowhere")
    finally:
        logger.disabled = False
    logger.setLevel(std_logging.DEBUG)
    client.get("/x", headers={"X-Request-Id": "abc"})
    lines = capture.lines
    assert len(lines) == 3, lines
    assert " /x 200 " in lines[0] and " rid=" not in lines[0]
    assert " /nowhere 404 " in lines[1]
    assert " /x 200 " in lines[2] and " rid=abc " in lines[2]


class _OnlyErrors(std_logging.Logger):
    """A logger class that decides by itself, whatever its level says."""

    def isEnabledFor(self, level: int) -> bool:
        return level >= std_logging.ERROR


def test_a_logger_class_with_its_own_is_enabled_for_is_asked() -> None:
    logger = _OnlyErrors("socketify.test.only_errors")
    logger.setLevel(std_logging.DEBUG)
    logger.propagate = False
    handler = Capture()
    logger.addHandler(handler)
    assert std_logging.Logger.isEnabledFor(logger, std_logging.INFO)  # logging's cache: INFO on
    client = app(logging.middleware(logger=logger))
    client.get("/x")
    client.get("/boom")
    assert [" 500 " in line for line in handler.lines] == [True]
