"""`ServerOptions`: every knob of a `Server`, validated once and frozen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ServerOptions"]

_POSITIVE_SECONDS = (
    "header_timeout",
    "body_timeout",
    "idle_timeout",
    "graceful_timeout",
    "timeout",
)
_POSITIVE_SIZES = (
    "max_header_size",
    "max_target_size",
    "max_body_size",
    "max_connections",
    "backlog",
)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Server settings; durations are seconds, sizes are bytes.

    An unknown keyword raises `TypeError` (the dataclass constructor does that for us), a value
    out of range raises `ValueError`, so a typo never silently falls back to a default.
    """

    workers: int | None = None  # None: one per CPU; 0: serve in the master process
    header_timeout: float = 15.0
    body_timeout: float = 30.0
    idle_timeout: float = 60.0
    request_timeout: float | None = None
    graceful_timeout: float = 30.0
    max_header_size: int = 16384
    max_target_size: int = 8192
    max_body_size: int = 16 * 1024 * 1024
    max_connections: int = 10_000
    compression: Any = True  # bool or a CompressionOptions
    trust_proxy: bool = False
    debug: bool = False
    tls: Any = None  # None or a TlsOptions
    timeout: float = 30.0  # worker heartbeat: a silent worker is replaced after this
    max_requests: int = 0
    max_requests_jitter: int = 0
    backlog: int = 2048

    def __post_init__(self) -> None:
        for name in _POSITIVE_SECONDS + _POSITIVE_SIZES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.request_timeout is not None and not self.request_timeout > 0:
            raise ValueError(f"request_timeout must be > 0 or None, got {self.request_timeout!r}")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 0):
            raise ValueError(f"workers must be None or an int >= 0, got {self.workers!r}")
        for name in ("max_requests", "max_requests_jitter"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
