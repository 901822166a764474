"""`load_tests/bench_http2.py`: the HTTP/2 probe and how rounds with errors reach the verdict.

The probe talks to a one-shot socket server that answers the client preface with canned bytes;
the verdict is computed from hand-made rounds, so neither needs h2load or a real server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from load_tests.bench_http2 import BARS, EMPTY_SETTINGS, Outcome, Sample, Target, h2_refusal
from load_tests.bench_http2 import _verdict as verdict
from load_tests.harness import HOST


@pytest.fixture
def answering() -> Iterator[Callable[[bytes], int]]:
    """Start a server on a free port that reads the preface, sends the given bytes, closes."""
    listeners: list[socket.socket] = []

    def start(answer: bytes) -> int:
        listener = socket.create_server((HOST, 0))
        listeners.append(listener)

        def serve_once() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(answer)

        threading.Thread(target=serve_once, daemon=True).start()
        return listener.getsockname()[1]

    yield start
    for listener in listeners:
        listener.close()


def test_server_answering_settings_speaks_http2(answering: Callable[[bytes], int]) -> None:
    assert h2_refusal(answering(EMPTY_SETTINGS), tls=False) is None


def test_http11_answer_to_the_preface_is_named(answering: Callable[[bytes], int]) -> None:
    port = answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    refusal = h2_refusal(port, tls=False)
    assert (
        refusal
        == "answered the HTTP/2 client preface with 'HTTP/1.1 400 Bad Request': no HTTP/2 there"
    )


def test_first_frame_other_than_settings_is_refused(answering: Callable[[bytes], int]) -> None:
    goaway = b"\x00\x00\x08\x07\x00\x00\x00\x00\x00" + bytes(8)
    assert "type 7, not SETTINGS" in (h2_refusal(answering(goaway), tls=False) or "")


def test_close_without_an_answer_is_refused(answering: Callable[[bytes], int]) -> None:
    assert "closed the connection" in (h2_refusal(answering(b""), tls=False) or "")


def _outcome(key: str, rates: list[float], problems: list[str | None]) -> Outcome:
    target = Target(key, key, "server", "/ping", "h2c")
    samples = [Sample(rate, problem, {}) for rate, problem in zip(rates, problems, strict=True)]
    return Outcome(target, samples=samples)


def test_round_with_errors_on_either_side_leaves_the_ratio_out() -> None:
    bar = BARS[0]
    outcomes = [
        _outcome(bar.numerator, [300.0, 900.0, 330.0], [None, "10 failed", None]),
        _outcome(bar.denominator, [100.0, 100.0, 100.0], [None, None, None]),
    ]
    result = verdict(bar, outcomes, rounds=3)
    assert result["ratios"] == [3.0, 3.3]
    assert result["median"] == pytest.approx(3.15)
    assert result["verdict"] == "PASS"


def test_unavailable_side_makes_the_bar_not_measured_with_the_reason() -> None:
    bar = BARS[0]
    ours = Outcome(Target(bar.numerator, "ours h2c", "ours", "/ping", "h2c"), "no HTTP/2 there")
    outcomes = [ours, _outcome(bar.denominator, [100.0], [None])]
    result = verdict(bar, outcomes, rounds=1)
    assert result["median"] is None
    assert result["verdict"] == "NOT MEASURED (ours h2c: no HTTP/2 there)"
