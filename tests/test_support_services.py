"""tests/support/services.py: a missing service, driver or program skips locally and fails
under CI's flag."""

from __future__ import annotations

import socket

import pytest

from tests.support.ports import free_port
from tests.support.services import REQUIRE_ENV, require_module, require_program, require_service


def test_unreachable_service_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    port = free_port()  # nobody listens once it is released
    with pytest.raises(pytest.skip.Exception, match=f"Redis is not reachable at 127.0.0.1:{port}"):
        require_service("Redis", "127.0.0.1", port)


def test_unreachable_service_fails_when_services_are_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_ENV}=1 makes this a failure"):
        require_service("Redis", "127.0.0.1", free_port())


def test_reachable_service_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        require_service("test listener", "127.0.0.1", listener.getsockname()[1])


def test_missing_module_skips_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="pip install nothing"):
        require_module("no_such_driver_module", "pip install nothing")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception):
        require_module("no_such_driver_module")
    assert require_module("json").dumps([]) == "[]"


def test_missing_program_skips_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="Debian package 'nothing'"):
        require_program("no-such-program-here", "nothing")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception):
        require_program("no-such-program-here", "nothing")
    assert require_program("sh", "dash").endswith("/sh")
