"""How an access line reaches the log: `LineSink`, and handlers that write it in one call.

Theory of operation. One access line per request is the hottest use of `logging` in a
server, and the stdlib path is heavy for it: `logger.log()` walks the stack for the caller,
a LogRecord fills in ~20 attributes, a `StreamHandler` takes its lock twice, formats, writes
into a `TextIOWrapper` and flushes. Configuration still belongs to `logging` (the level,
handlers and filters of the `socketify.access` logger decide everything); only the delivery
is made cheap:

- `AccessLogHandler` / `AccessLogFileHandler` write whole lines with `os.write` and no lock:
  one write of whole lines to a file opened for append (or a pipe, up to PIPE_BUF) is never
  interleaved with another, whichever greenlet, thread or worker writes it. With no
  formatter set the line is the message (`%(message)s`, the default); a formatter that is set
  is used. The file variant is a `logging.FileHandler`, so `workers.supervise.logfiles`
  reopens it on SIGUSR1 (lines batched at that moment go to the new file).
- Batching: in a greenlet under a running gevent hub, lines are collected and written
  together by a callback queued on the hub, which runs as soon as the greenlets that are
  ready have run — the end of the current turn of the event loop, well under a millisecond
  unless a handler hogs the CPU — or as soon as BATCH_LINES lines are waiting. A batch is
  written in whole lines, at most 4096 bytes (PIPE_BUF) per `write`. Under load one `write`
  then carries the lines of many requests instead of one each. `flush()` (which
  `logging.shutdown()` calls when a worker exits) writes what is pending. Outside a hub's
  greenlets (the main greenlet, plain threads) each line is written at once.
- `LineSink.send` hands the line straight to such handlers when they are all the logger has
  (no filters, no formatter, no propagation): no LogRecord at all. Otherwise it builds a real
  LogRecord from a per-process template (only message, level and times change) and calls
  `logger.handle`, so any handler, filter or custom record factory works as usual.
"""

from __future__ import annotations

import _thread
import io
import logging
import os
import sys
import time
from typing import Any

__all__ = ["BATCH_BYTES", "BATCH_LINES", "AccessLogFileHandler", "AccessLogHandler", "LineSink"]

# At most PIPE_BUF per write: a pipe (journald, a supervisor) never interleaves such a write
# with another worker's, so batched lines stay whole.
BATCH_BYTES = 4096
# A batch is written once it holds this many lines (or at the end of the loop turn).
BATCH_LINES = 64


class _OneWrite(logging.StreamHandler):
    """The shared part: `handle` without the lock, `emit` as whole lines, batched writes."""

    _pending: list[str] | None = None  # lines waiting for the end of this loop turn
    _pending_thread = 0
    _fd_stream: Any = None  # the stream `_has_fd` was worked out for
    _has_fd = False

    def handle(self, record: logging.LogRecord) -> bool:
        """Filter, then emit; no lock (see the module doc)."""
        if self.filters and not self.filter(record):
            return False
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        """Write the formatted record and a newline (see `write_line`)."""
        try:
            self.write_line(record.getMessage() if self.formatter is None else self.format(record))
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def write_line(self, text: str) -> None:
        """Write `text` and the terminator whole: now, or batched in this loop turn."""
        pending = self._pending
        if pending is not None:
            # PERF: a batch belongs to one thread's hub; comparing thread ids is enough (the
            # hub's callback, or flush() at exit, writes it even if we are its main greenlet).
            if self._pending_thread == get_ident():
                pending.append(text)
                if len(pending) >= BATCH_LINES:
                    self.write_pending()
                return
            self.write_pending()  # another thread's loop: keep our order, then write alone
        stream = self.stream
        if stream is None:  # a FileHandler opened with delay=True
            stream = self.stream = self._open_stream()
        if stream is not self._fd_stream:
            # PERF: whether the stream has a file descriptor is asked once per stream (a
            # reopened file is a new one), not per line; a closed one fails when written.
            self._has_fd = _has_fileno(stream)
            self._fd_stream = stream
        if not self._has_fd:
            stream.write(text + self.terminator)  # e.g. a StringIO in tests
            stream.flush()
            return
        if len(text) < BATCH_BYTES and (hub := _hub_if_running()) is not None:
            self._pending = [text]
            self._pending_thread = get_ident()
            hub.loop.run_callback(self.write_pending, True)
            return
        _write_lines(stream.fileno(), self._encode(text + self.terminator))

    def write_pending(self, from_hub: bool = False) -> None:
        """Write the batched lines now, in as few `write` calls as PIPE_BUF allows.

        `from_hub`: called back by the hub at the end of a loop turn, where an error has no
        caller to go to; it is reported with `handleError`, as `emit` would.
        """
        pending = self._pending
        if not pending:
            return
        self._pending = None
        try:
            stream = self.stream
            if stream is None:
                stream = self.stream = self._open_stream()
            pending.append("")  # the terminator after the last line too
            encoding = getattr(stream, "encoding", None) or "utf-8"
            data = self.terminator.join(pending).encode(encoding, "backslashreplace")
            fd = stream.fileno()
            # PERF: a batch that fits is one write; a longer one goes in whole-line pieces.
            written = os.write(fd, data) if len(data) <= BATCH_BYTES else 0
            if written < len(data):
                _write_lines(fd, data[written:])
        except Exception:
            if not from_hub:
                raise
            self.handleError(logging.makeLogRecord({"msg": "access log lines lost"}))

    def _encode(self, text: str) -> bytes:
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        return text.encode(encoding, "backslashreplace")

    def flush(self) -> None:
        """Write the batched lines, then flush the stream (logging.shutdown calls this)."""
        try:
            self.write_pending()
        finally:
            super().flush()

    def _open_stream(self) -> Any:
        raise ValueError("this handler has no stream")


class AccessLogHandler(_OneWrite):
    """Access lines to a stream (default: stderr), one `write` each."""


class AccessLogFileHandler(logging.FileHandler, _OneWrite):
    """Access lines appended to a file, one `write` each; reopened on SIGUSR1 like FileHandler."""

    def __init__(self, filename: str, encoding: str | None = "utf-8", delay: bool = False) -> None:
        super().__init__(filename, mode="a", encoding=encoding, delay=delay)

    def _open_stream(self) -> Any:
        return self._open()

    handle = _OneWrite.handle
    emit = _OneWrite.emit


class LineSink:
    """Delivers preformatted lines to a logger's handlers (see the module doc)."""

    __slots__ = ("_direct", "_forks", "_levels", "_logger", "_seen", "_start_ns", "_template")

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: list[logging.Handler] | None = None  # the handlers `_direct` was worked out for
        self._direct: list[_OneWrite] | None = None
        self._forks = -1
        self._template: dict[str, Any] = {}
        self._start_ns = 0
        self._levels: dict[int, str] = {}

    def send(self, level: int, line: str) -> None:
        """Log `line` at `level` (the caller checked that the logger takes that level)."""
        logger = self._logger
        # Whether lines may skip the LogRecord is worked out again only when the logger's
        # handlers or settings change (handlers' formatters and filters are checked below).
        if logger.handlers == self._seen and not (
            logger.propagate or logger.filters or logger.disabled
        ):
            direct = self._direct
        else:
            direct = self._direct = _direct_handlers(logger)
            self._seen = list(logger.handlers)
        if direct is None:
            logger.handle(self.record(level, line))
            return
        for handler in direct:
            if level < handler.level:
                continue
            if handler.formatter or handler.filters:  # set since: the full path
                self._seen = None
                handler.handle(self.record(level, line))
                continue
            try:
                handler.write_line(line)
            except Exception:
                handler.handleError(self.record(level, line))

    def record(self, level: int, line: str) -> logging.LogRecord:
        """A LogRecord for `line`, equal to what `logger.makeRecord` would build."""
        logger = self._logger
        if logging.getLogRecordFactory() is not logging.LogRecord:
            return logger.makeRecord(logger.name, level, "", 0, line, (), None)
        if self._forks != _forks[0]:  # first use, or after a fork: the process id changed
            sample = logging.LogRecord(logger.name, logging.INFO, "", 0, "", (), None)
            self._template = sample.__dict__
            # relativeCreated counts from when logging was imported; recover that origin.
            self._start_ns = int((sample.created - sample.relativeCreated / 1000) * 1e9)
            self._forks = _forks[0]
        record = logging.LogRecord.__new__(logging.LogRecord)
        fields = record.__dict__
        fields.update(self._template)
        now = time.time_ns()
        fields["msg"] = line
        fields["levelno"] = level
        fields["levelname"] = self._levels.get(level) or self._level_name(level)
        fields["created"] = now / 1e9
        fields["msecs"] = (now % 1_000_000_000) // 1_000_000 + 0.0
        fields["relativeCreated"] = (now - self._start_ns) / 1e6
        return record

    def _level_name(self, level: int) -> str:
        name = self._levels[level] = logging.getLevelName(level)
        return str(name)


def _hub_if_running() -> Any:
    """This thread's gevent hub when we run in a greenlet it schedules, else None.

    A greenlet other than the main one only runs under a running hub, so a callback queued on
    that hub runs once this greenlet waits or ends: a batch cannot be left behind. In the
    main greenlet (scripts, TestClient without a server) lines are written at once.
    """
    greenlet = sys.modules.get("greenlet")
    gevent = sys.modules.get("gevent")
    if greenlet is None or gevent is None:  # not imported: no hub (and no import here)
        return None
    current = greenlet.getcurrent()
    if current.parent is None:
        return None
    hub = gevent.get_hub()
    return hub if current is not hub else None


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return False  # a closed stream raises ValueError: its line fails like any write
    return True


def _write_lines(fd: int, data: bytes) -> None:
    """Write whole lines in pieces of at most BATCH_BYTES (a longer line goes alone)."""
    while data:
        end = len(data)
        if end > BATCH_BYTES:
            end = data.rfind(b"\n", 0, BATCH_BYTES) + 1  # 0: the first line alone is longer
            if not end:
                end = data.find(b"\n") + 1 or len(data)
        data = data[os.write(fd, data[:end]) :]


def _direct_handlers(logger: logging.Logger) -> list[_OneWrite] | None:
    """The logger's handlers if a line may skip the LogRecord for all of them, else None."""
    if logger.propagate or logger.filters or logger.disabled or not logger.handlers:
        return None
    handlers = logger.handlers
    for handler in handlers:
        if not isinstance(handler, _OneWrite) or handler.formatter or handler.filters:
            return None
    return handlers  # type: ignore[return-value]  # all _OneWrite, checked just above


def _os_thread_ident() -> Any:
    """`_thread.get_ident` as CPython has it, even when gevent patched it before this import:
    a batch belongs to one OS thread's hub, and a patched one answers per greenlet (every
    line would then be written alone)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("_thread"):
        return monkey.get_original("_thread", "get_ident")
    return _thread.get_ident


get_ident = _os_thread_ident()


# PERF: counted at fork instead of calling os.getpid() (a system call) for every line.
_forks = [0]


def _count_fork() -> None:
    _forks[0] += 1


os.register_at_fork(after_in_child=_count_fork)
