"""The Date of answers: IMF-fixdate text, and the one clock every protocol reads it from."""

from __future__ import annotations

import time

__all__ = ["DATE_CLOCK", "SERVER_NAME", "DateLines", "http_date"]

SERVER_NAME = "socketify"  # the Server header of every answer that does not set its own
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float | None = None) -> str:
    """Format a Unix time (default: now) as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`."""
    t = time.gmtime(time.time() if timestamp is None else timestamp)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


class DateLines:
    """The `Date:` and `Server:` lines of a response head, formatted at most once a second."""

    __slots__ = ("date", "lines", "until")

    def __init__(self) -> None:
        self.until = 0.0
        self.lines = ""
        self.date = ""  # the Date value alone, for protocols that send fields, not lines

    def get(self) -> str:
        """Return both lines, CRLF-terminated, for the current second."""
        now = time.time()
        if now >= self.until:  # PERF: one float compare per response, no int() call
            self._start_second(now)
        return self.lines

    def get_date(self) -> str:
        """Return the Date value for the current second."""
        now = time.time()
        if now >= self.until:
            self._start_second(now)
        return self.date

    def _start_second(self, now: float) -> None:
        self.date = http_date(now)
        self.lines = f"Date: {self.date}\r\nServer: {SERVER_NAME}\r\n"
        self.until = float(int(now) + 1)


# The one clock of the process: every protocol's answers read their Date from it.


# The one clock of the process: every protocol's answers read their Date from it.
DATE_CLOCK = DateLines()
