"""`Breaker` on a fake clock: fail fast while a backend is down, one probe per cooldown, one
log line when an outage starts and one when it ends."""

from __future__ import annotations

import logging

import pytest

from socketify.core.errors import HTTPError, StateUnavailable
from socketify.state.breaker import Breaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """A callable that fails with `error` while `error` is set."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.calls = 0

    def __call__(self, value: str = "ok") -> str:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return value


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breaker(clock: Clock) -> Breaker:
    return Breaker("Test 1.2.3.4:5", (ConnectionError, TimeoutError), cooldown=1.0, clock=clock)


def state_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "socketify.state"]


def test_state_unavailable_is_a_503_with_retry_after_that_hides_the_reason_from_clients() -> None:
    error = StateUnavailable("Redis 10.0.0.5:6379/0", "ConnectionError: refused", retry_after=2)
    assert isinstance(error, HTTPError)
    assert error.status == 503 and error.headers == {"Retry-After": "2"}
    assert "10.0.0.5" not in (error.message or "") and "refused" not in (error.message or "")
    assert str(error) == "503 Redis 10.0.0.5:6379/0 is unavailable: ConnectionError: refused"


def test_calls_pass_through_while_the_backend_answers(breaker: Breaker) -> None:
    backend = Backend()
    assert breaker.call(backend, "x") == "x"
    assert breaker.available and backend.calls == 1


def test_an_outage_is_logged_once_and_later_calls_fail_without_trying(
    breaker: Breaker, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    backend = Backend()
    backend.error = ConnectionError("refused")
    with caplog.at_level(logging.INFO, "socketify.state"):
        for _ in range(100):
            with pytest.raises(StateUnavailable) as caught:
                breaker.call(backend)
            assert caught.value.headers == {"Retry-After": "1"}
            clock.now += 0.001  # all within the cooldown
    assert backend.calls == 1  # only the first call reached the backend
    assert not breaker.available
    lines = state_lines(caplog)
    assert len(lines) == 1
    assert "Test 1.2.3.4:5 is unreachable (ConnectionError: refused)" in lines[0]
    assert "answering 503 until it returns" in lines[0]
    assert caplog.records[0].levelno == logging.ERROR and caplog.records[0].exc_info is None


def test_one_probe_per_cooldown_and_its_success_ends_the_outage_with_one_line(
    breaker: Breaker, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    backend = Backend()
    backend.error = TimeoutError("timed out")
    with caplog.at_level(logging.INFO, "socketify.state"):
        with pytest.raises(StateUnavailable):
            breaker.call(backend)
        for _ in range(3):  # three cooldowns, each with one failed probe and refused calls
            clock.now += 1.0
            for _ in range(5):
                with pytest.raises(StateUnavailable):
                    breaker.call(backend)
        assert backend.calls == 4
        backend.error = None
        clock.now += 0.5
        with pytest.raises(StateUnavailable):  # back, but not yet probed
            breaker.call(backend)
        clock.now += 0.5
        assert breaker.call(backend, "again") == "again"  # the probe
        assert breaker.available
        assert [breaker.call(backend) for _ in range(3)] == ["ok"] * 3
    lines = state_lines(caplog)
    assert len(lines) == 2
    assert "recovered after 4.0 s (17 operations answered 503 meanwhile)" in lines[1]
    assert caplog.records[1].levelno == logging.WARNING


def test_a_probe_that_is_interrupted_frees_the_way_for_the_next(
    breaker: Breaker, clock: Clock
) -> None:
    backend = Backend()
    backend.error = ConnectionError("reset")
    with pytest.raises(StateUnavailable):
        breaker.call(backend)
    clock.now += 1.0
    backend.error = KeyboardInterrupt()  # e.g. a greenlet killed while it probes
    with pytest.raises(KeyboardInterrupt):
        breaker.call(backend)
    backend.error = None
    clock.now += 1.0
    assert breaker.call(backend) == "ok"


def test_errors_that_are_not_outages_pass_through_and_a_probe_that_meets_one_recovers(
    breaker: Breaker, clock: Clock
) -> None:
    backend = Backend()
    backend.error = ValueError("WRONGTYPE")
    with pytest.raises(ValueError):
        breaker.call(backend)
    assert breaker.available  # the backend answered
    backend.error = ConnectionError("refused")
    with pytest.raises(StateUnavailable):
        breaker.call(backend)
    clock.now += 1.0
    backend.error = ValueError("WRONGTYPE")
    with pytest.raises(ValueError):
        breaker.call(backend)
    assert breaker.available


def test_failures_reported_from_outside_share_the_outage(
    breaker: Breaker, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The bus listener reports what it sees; the store's calls then fail fast."""
    backend = Backend()
    with caplog.at_level(logging.INFO, "socketify.state"):
        breaker.failed(ConnectionError("Connection closed by server"))
        breaker.failed(ConnectionError("refused"))
        with pytest.raises(StateUnavailable):
            breaker.call(backend)
        breaker.succeeded()
        breaker.succeeded()
        assert breaker.call(backend) == "ok"
    assert backend.calls == 1
    assert len(state_lines(caplog)) == 2


def test_reset_forgets_an_outage(breaker: Breaker) -> None:
    breaker.failed(ConnectionError("refused"))
    breaker.reset()
    assert breaker.available and breaker.call(Backend()) == "ok"
