"""Exceptions that carry an HTTP answer."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["HTTPError", "StateUnavailable"]


class HTTPError(Exception):
    """Raise anywhere in a request to answer with `status` and a plain-text `message`."""

    def __init__(
        self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        return f"{self.status} {self.message or ''}".rstrip()


class StateUnavailable(HTTPError):
    """The shared-state backend (e.g. Redis) cannot answer now: 503 with `Retry-After`.

    Every store, cache, rate-limit and session operation raises it while its backend is
    unreachable, so the request is answered 503 without a traceback. `backend` and `reason`
    say what failed, for logs and user code; the client sees neither.
    """

    def __init__(self, backend: str, reason: str, retry_after: int = 1) -> None:
        super().__init__(
            503,
            "Service Unavailable: shared state is unreachable; retry shortly",
            {"Retry-After": str(retry_after)},
        )
        self.backend = backend
        self.reason = reason
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"503 {self.backend} is unavailable: {self.reason}"
