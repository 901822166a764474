"""The HTTP metrics every worker records: requests by route and status, durations, in flight.

`RequestMetrics` is an `Application.instrument` wrapper: it sees each request before the
middleware and its final answer after, so a request answered by a middleware, a 404 or an
error page is counted like any other. Labels stay bounded whatever clients send: the route is
the *pattern* that answered ("/users/:id") or "<unmatched>", and a method outside the standard
ones is "OTHER".
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from time import perf_counter_ns
from typing import TYPE_CHECKING

from socketify.metrics.builtin import CONNECTIONS, IN_FLIGHT, REQUESTS, duration_family
from socketify.metrics.families import DEFAULT_BUCKETS
from socketify.metrics.recorder import Recorder

if TYPE_CHECKING:
    from socketify.core.application import Answer
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["METHODS", "UNMATCHED", "RequestMetrics"]

UNMATCHED = "<unmatched>"
METHODS = frozenset(
    ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
)


class RequestMetrics:
    """Counts each request into `recorder`: `app.instrument(RequestMetrics(recorder))`."""

    def __init__(self, recorder: Recorder, buckets: Iterable[float] = DEFAULT_BUCKETS) -> None:
        self._recorder = recorder
        self._durations = duration_family(buckets)
        self._cells = recorder.cells
        self._in_flight = recorder.cell(IN_FLIGHT)
        self._bounds = self._durations.buckets
        self._sum_offset = len(self._bounds) + 1  # the sum cell follows the +Inf bucket
        # PERF: per (method, route, status), its count cell and its histogram's first cell,
        # found once; a request then costs one dict lookup and four float additions in shared
        # memory. Methods outside METHODS are not cached, so clients cannot grow the dict.
        self._cells_of: dict[tuple[str, str | None, int], tuple[int, int]] = {}

    def __call__(self, req: Request, res: Response, answer: Answer) -> None:
        cells = self._cells
        in_flight = self._in_flight
        cells[in_flight] += 1
        try:
            answer(req, res)
        finally:
            cells[in_flight] -= 1
        key = (req.method, req.route, res.status_code)
        found = self._cells_of.get(key)
        if found is None:
            found = self._register(key)
        count_at, first = found
        cells[count_at] += 1
        seconds = (perf_counter_ns() - req.started_ns) / 1e9
        cells[first + bisect_left(self._bounds, seconds)] += 1  # bounds are "<="
        cells[first + self._sum_offset] += seconds
        if res.upgrade is not None:
            self._upgraded(res, "websocket" if key[2] == 101 else "sse")

    def _register(self, key: tuple[str, str | None, int]) -> tuple[int, int]:
        method, route, status = key
        known = method in METHODS
        label = method if known else "OTHER"
        pattern = route or UNMATCHED
        found = (
            self._recorder.cell(REQUESTS, (label, pattern, str(status))),
            self._recorder.cell(self._durations, (label, pattern)),
        )
        if known:
            self._cells_of[key] = found
        return found

    def _upgraded(self, res: Response, protocol: str) -> None:
        # The connection is handed over once this returns; the response's close callbacks
        # run when the upgraded session ends.
        at = self._recorder.cell(CONNECTIONS, (protocol,))
        cells = self._cells
        cells[at] += 1

        def closed() -> None:
            cells[at] -= 1

        res.call_on_close(closed)
