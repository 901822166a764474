"""`Breaker`: a backend outage answered at once with 503, logged once, probed once a second.

    breaker = breaker_for("Redis 10.0.0.5:6379/0", (ConnectionError, TimeoutError))
    value = breaker.call(client.get, "key")     # StateUnavailable while the backend is down

Theory of operation. A process keeps one `Breaker` per backend (`breaker_for` hands out the
same one for the same name), so the store, the bus publisher and the bus listener of one Redis
share it and an outage is logged once per process, however many requests meet it, and once
again when it ends. While the backend answers, `call(fn, ...)` just runs `fn`. The first
failure of a kind that means "unreachable" (`outage_errors`: refused, reset, timed out) opens
the breaker: one ERROR line, then `StateUnavailable`, which the app answers 503 with
`Retry-After`. While it is open, calls fail at once, so no request waits for a timeout that
is sure to come, except one probe every `cooldown` seconds, which tries the backend for real:
its success closes the breaker (one WARNING line, "... recovered after ..."), its failure keeps
it open for another cooldown. Errors of other kinds (a bad command) pass through untouched: the
backend answered. A forked child starts with every breaker closed.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from socketify.core.errors import StateUnavailable

__all__ = ["Breaker", "breaker_for", "breakers"]

log = logging.getLogger("socketify.state")

T = TypeVar("T")

COOLDOWN = 1.0  # seconds between probes of a backend that is down
# A probe is bounded by the client's own timeouts; past this a stuck one stops blocking others.
PROBE_LIMIT = 10.0


class Breaker:
    """Fails fast while a backend is down, lets one probe through per `cooldown`."""

    def __init__(
        self,
        name: str,
        outage_errors: tuple[type[BaseException], ...],
        *,
        cooldown: float = COOLDOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.outage_errors = outage_errors
        self.cooldown = cooldown
        self.retry_after = max(1, math.ceil(cooldown))
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget any outage (a forked child does: its parent's view is not its own)."""
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._reason = ""
        self._next_probe = 0.0
        self._probe_until = 0.0  # a probe is running until then
        self._refused = 0

    @property
    def available(self) -> bool:
        """False from the first failure until a call succeeds again."""
        return self._down_since is None

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`, or `StateUnavailable` when the backend is (found) down."""
        probe = self._down_since is not None and self._admit()
        try:
            result = fn(*args, **kwargs)
        except self.outage_errors as exc:
            self.failed(exc)
            raise self.unavailable() from None
        except Exception:
            if probe:
                self.succeeded()  # the backend answered, if only with an error
            raise
        finally:
            if probe:
                self._probe_until = 0.0
        if probe:
            self.succeeded()
        return result

    def failed(self, error: BaseException) -> None:
        """Record a failure to reach the backend; the first of an outage is logged."""
        reason = f"{type(error).__name__}: {error}"
        with self._lock:
            opening = self._down_since is None
            now = self._clock()
            if opening:
                self._down_since = now
                self._reason = reason
                self._refused = 0
            self._next_probe = now + self.cooldown
        if opening:
            log.error("%s is unreachable (%s); answering 503 until it returns", self.name, reason)

    def succeeded(self) -> None:
        """Record that the backend answered; ends an outage (logged once)."""
        with self._lock:
            since = self._down_since
            if since is None:
                return
            self._down_since = None
            refused = self._refused
        log.warning(
            "%s recovered after %.1f s (%d operations answered 503 meanwhile)",
            self.name,
            self._clock() - since,
            refused,
        )

    def unavailable(self) -> StateUnavailable:
        """The exception a refused call raises."""
        self._refused += 1
        return StateUnavailable(self.name, self._reason or "unreachable", self.retry_after)

    def _admit(self) -> bool:
        """True if this call is the probe; raises `StateUnavailable` if it may not run."""
        with self._lock:
            if self._down_since is None:
                return False  # recovered meanwhile
            now = self._clock()
            probe = now >= self._next_probe and now >= self._probe_until
            if probe:
                self._probe_until = now + PROBE_LIMIT
                self._next_probe = now + self.cooldown
        if not probe:
            raise self.unavailable()
        return True

    def __repr__(self) -> str:
        state = "up" if self._down_since is None else f"down ({self._reason})"
        return f"<Breaker {self.name} {state}>"


_breakers: dict[str, Breaker] = {}
_registry_lock = threading.Lock()


def breaker_for(
    name: str, outage_errors: tuple[type[BaseException], ...], *, cooldown: float = COOLDOWN
) -> Breaker:
    """This process's breaker for the backend called `name` (made on first request)."""
    with _registry_lock:
        breaker = _breakers.get(name)
        if breaker is None:
            breaker = _breakers[name] = Breaker(name, outage_errors, cooldown=cooldown)
        return breaker


def breakers() -> list[Breaker]:
    """Every breaker this process has made (one per backend it has used)."""
    with _registry_lock:
        return list(_breakers.values())


def _after_fork() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for breaker in _breakers.values():
        breaker.reset()


os.register_at_fork(after_in_child=_after_fork)
