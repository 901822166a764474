"""Why a connection greenlet stops early."""

from __future__ import annotations

__all__ = ["Expired", "PeerGone"]


class Expired(BaseException):
    """Thrown into a connection greenlet whose phase deadline passed.

    A BaseException, like gevent.Timeout, so a handler's `except Exception` cannot swallow it.
    """

    def __init__(self, phase: int) -> None:
        super().__init__(phase)
        self.phase = phase


class PeerGone(Exception):
    """The client closed or reset the connection while we were writing."""
