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
        # PERF: the cells of each (method, route, status) and (method, route), found once; a
        # request then costs a few dict lookups and float additions in shared memory.
        self._count_cells: dict[tuple[str, str | None, int], int] = {}
        self._duration_cells: dict[tuple[str, str | None], int] = {}

    def __call__(self, req: Request, res: Response, answer: Answer) -> None:
        cells = self._cells
        in_flight = self._in_flight
        cells[in_flight] += 1
        try:
            answer(req, res)
        finally:
            cells[in_flight] -= 1
        method = req.method
        if method not in METHODS:
            method = "OTHER"
        route = req.route
        status = res.status_code
        at = self._count_cells.get((method, route, status))
        if at is None:
            at = self._count_cells[(method, route, status)] = self._recorder.cell(
                REQUESTS, (method, route or UNMATCHED, str(status))
            )
        cells[at] += 1
        first = self._duration_cells.get((method, route))
        if first is None:
            first = self._duration_cells[(method, route)] = self._recorder.cell(
                self._durations, (method, route or UNMATCHED)
            )
        seconds = (perf_counter_ns() - req.started_ns) / 1e9
        bounds = self._bounds
        cells[first + bisect_left(bounds, seconds)] += 1  # bounds are "<="
        cells[first + len(bounds) + 1] += seconds
        if res.upgrade is not None:
            self._upgraded(res, "websocket" if status == 101 else "sse")

    def _upgraded(self, res: Response, protocol: str) -> None:
        # The connection is handed over once this returns; the response's close callbacks
        # run when the upgraded session ends.
        at = self._recorder.cell(CONNECTIONS, (protocol,))
        cells = self._cells
        cells[at] += 1

        def closed() -> None:
            cells[at] -= 1

        res.call_on_close(closed)
