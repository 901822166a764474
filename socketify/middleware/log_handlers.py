"""How an access line reaches the log: `LineSink`, and handlers that write it in one call.

Theory of operation. One access line per request is the hottest use of `logging` in a
server, and the stdlib path is heavy for it: `logger.log()` walks the stack for the caller,
a LogRecord fills in ~20 attributes, a `StreamHandler` takes its lock twice, formats, writes
into a `TextIOWrapper` and flushes. Configuration still belongs to `logging` (the level,
handlers and filters of the `socketify.access` logger decide everything); only the delivery
is made cheap:

- `AccessLogHandler` / `AccessLogFileHandler` write a line with one `os.write` and no lock:
  one write of a whole line to a file opened for append (or a pipe, up to PIPE_BUF) is never
  interleaved with another, whichever greenlet or thread writes it. With no formatter set
  the line is the message (`%(message)s`, the default); a formatter that is set is used. The
  file variant is a `logging.FileHandler`, so `workers.logfiles` reopens it on SIGUSR1.
- `LineSink.send` hands the line straight to such handlers when they are all the logger has
  (no filters, no formatter, no propagation): no LogRecord at all. Otherwise it builds a real
  LogRecord from a per-process template (only message, level and times change) and calls
  `logger.handle`, so any handler, filter or custom record factory works as usual.
"""

from __future__ import annotations

import io
import logging
import os
import time
from typing import Any

__all__ = ["AccessLogFileHandler", "AccessLogHandler", "LineSink"]


class _OneWrite(logging.StreamHandler):
    """The shared part: `handle` without the lock and `emit` as a single write."""

    def handle(self, record: logging.LogRecord) -> bool:
        """Filter, then emit; no lock (see the module doc)."""
        if self.filters and not self.filter(record):
            return False
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        """Write the formatted record and a newline with one system call."""
        try:
            self.write_line(record.getMessage() if self.formatter is None else self.format(record))
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def write_line(self, text: str) -> None:
        """Write `text` and the terminator as one `write` (errors propagate)."""
        stream = self.stream
        if stream is None:  # a FileHandler opened with delay=True
            stream = self.stream = self._open_stream()
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            stream.write(text + self.terminator)  # e.g. a StringIO in tests
            stream.flush()
            return
        data = (text + self.terminator).encode(
            getattr(stream, "encoding", None) or "utf-8", "backslashreplace"
        )
        while data:
            data = data[os.write(fd, data) :]

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

    __slots__ = ("_forks", "_levels", "_logger", "_start_ns", "_template")

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._forks = -1
        self._template: dict[str, Any] = {}
        self._start_ns = 0
        self._levels: dict[int, str] = {}

    def enabled(self, level: int) -> bool:
        """Whether a line at `level` would be logged at all."""
        return self._logger.isEnabledFor(level)

    def send(self, level: int, line: str) -> None:
        """Log `line` at `level` (the caller checked `enabled`)."""
        logger = self._logger
        direct = _direct_handlers(logger)
        if direct is None:
            logger.handle(self.record(level, line))
            return
        for handler in direct:
            if level >= handler.level:
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


def _direct_handlers(logger: logging.Logger) -> list[_OneWrite] | None:
    """The logger's handlers if a line may skip the LogRecord for all of them, else None."""
    if logger.propagate or logger.filters or logger.disabled or not logger.handlers:
        return None
    direct = [
        h for h in logger.handlers if isinstance(h, _OneWrite) and not h.formatter and not h.filters
    ]
    return direct if len(direct) == len(logger.handlers) else None


# PERF: counted at fork instead of calling os.getpid() (a system call) for every line.
_forks = [0]


def _count_fork() -> None:
    _forks[0] += 1


os.register_at_fork(after_in_child=_count_fork)
