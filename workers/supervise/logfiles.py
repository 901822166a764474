"""Reopen log files after logrotate moved them (what SIGUSR1 asks for)."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["file_handlers", "reopen_log_files"]


def file_handlers() -> list[logging.FileHandler]:
    """Every FileHandler attached to the root logger or any named logger, without duplicates."""
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [
        item
        for item in logging.Logger.manager.loggerDict.values()
        if isinstance(item, logging.Logger)
    ]
    found: dict[int, logging.FileHandler] = {}
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.FileHandler):
                found[id(handler)] = handler
    return list(found.values())


def reopen_log_files() -> int:
    """Close and reopen every FileHandler's file by name; returns how many were reopened.

    Writes in progress finish first (the handler's lock is held), and a handler opened with
    ``delay=True`` that never wrote stays closed until its first record.
    """
    reopened = 0
    for handler in file_handlers():
        handler.acquire()
        try:
            if handler.stream is None:
                continue
            fresh: Any = open(  # noqa: SIM115 (the handler owns the file from now on)
                handler.baseFilename, handler.mode, encoding=handler.encoding, errors=handler.errors
            )
            old = handler.setStream(fresh)  # flushes the old stream
            if old is not None:
                old.close()
            reopened += 1
        finally:
            handler.release()
    return reopened
