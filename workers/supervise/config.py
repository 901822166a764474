"""The master's settings, as one frozen value checked when it is built."""

from __future__ import annotations

import os
from dataclasses import dataclass

from workers.supervise.sockets import DEFAULT_BACKLOG, DEFAULT_UNIX_MODE

__all__ = ["MasterConfig"]


@dataclass(frozen=True)
class MasterConfig:
    """What to listen on, how many workers, and the timeouts that govern their lives.

    ``timeout`` is the heartbeat limit (0 turns it off); ``graceful_timeout`` is how long a
    stopping worker may drain in-flight requests; ``max_requests`` (plus up to
    ``max_requests_jitter``) recycles a worker after that many requests (0 = never);
    ``reload`` polls ``*.py`` files under ``reload_dirs`` (default: the current directory)
    and reloads like SIGHUP when one changes.
    """

    binds: list[str]
    workers: int | None = None
    timeout: float = 30.0
    graceful_timeout: float = 30.0
    max_requests: int = 0
    max_requests_jitter: int = 0
    backlog: int = DEFAULT_BACKLOG
    reload: bool = False
    reload_dirs: tuple[str, ...] = ()
    proc_name: str = "socketify"
    unix_socket_mode: int = DEFAULT_UNIX_MODE

    def __post_init__(self) -> None:
        if isinstance(self.binds, str):
            raise TypeError("binds must be a list of bind specs, not a string")
        if not self.binds:
            raise ValueError("binds must name at least one address")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        for name in ("timeout", "graceful_timeout"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("max_requests", "max_requests_jitter"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.backlog < 1:
            raise ValueError("backlog must be at least 1")

    @property
    def worker_count(self) -> int:
        """The number of workers to start with: ``workers``, or the CPU count."""
        return self.workers if self.workers is not None else os.cpu_count() or 1

    @property
    def record_capacity(self) -> int:
        """How many worker records the shared tables hold (heartbeats, and any table indexed
        by record, such as metrics tallies)."""
        # Room for two generations side by side, plus retiring workers and TTIN growth.
        return max(256, 8 * self.worker_count)
