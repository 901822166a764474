"""Run wrk and parse its `--latency` report.

wrk prints times with the units us, ms, s, m and h, and sizes with B, KB, MB, GB and TB (powers
of 1024); everything is converted to milliseconds and bytes here. "Socket errors" and
"Non-2xx or 3xx responses" lines only appear when non-zero, so their absence means 0.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass

from load_tests.harness import LOAD_TESTS, pinned

PIPELINE_SCRIPT = LOAD_TESTS / "pipeline.lua"
MS_PER_UNIT = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
BYTES_PER_UNIT = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}

_TIME = r"([\d.]+)(us|ms|s|m|h)\b"
_RPS = re.compile(r"^Requests/sec:\s+([\d.]+)", re.M)
_TRANSFER = re.compile(r"^Transfer/sec:\s+([\d.]+)([KMGT]?B)", re.M)
_AVG = re.compile(r"^\s+Latency\s+" + _TIME, re.M)
_PERCENTILE = re.compile(r"^\s+(50|75|90|99)%\s+" + _TIME, re.M)
_TOTAL = re.compile(r"^\s+(\d+) requests in " + _TIME, re.M)
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


class WrkFailed(RuntimeError):
    """wrk exited with an error or printed something that is not a --latency report."""


@dataclass(frozen=True)
class SocketErrors:
    """wrk's "Socket errors" line; a timeout is a request without a response after 2 s."""

    connect: int = 0
    read: int = 0
    write: int = 0
    timeout: int = 0

    @property
    def total(self) -> int:
        """All socket errors together."""
        return self.connect + self.read + self.write + self.timeout


@dataclass(frozen=True)
class WrkResult:
    """The figures of one wrk run."""

    requests_per_sec: float
    requests: int
    duration_s: float
    avg_ms: float
    p50_ms: float
    p75_ms: float
    p90_ms: float
    p99_ms: float
    transfer_bytes_per_sec: float
    socket_errors: SocketErrors
    non_2xx: int  # wrk counts responses that are neither 2xx nor 3xx
    pipeline: int


@dataclass(frozen=True)
class WrkRun:
    """How to drive wrk: threads, connections, seconds, an optional CPU and pipeline depth."""

    connections: int
    duration: int
    threads: int = 1
    cpu: int | None = None
    pipeline: int = 1  # > 1: that many requests per write, through pipeline.lua

    def argv(self, url: str) -> list[str]:
        """The wrk command line for url, under taskset when cpu is set."""
        if shutil.which("wrk") is None:
            raise WrkFailed("wrk is not on PATH (Debian/Ubuntu: apt-get install wrk)")
        argv = ["wrk", f"-t{self.threads}", f"-c{self.connections}", f"-d{self.duration}s"]
        argv.append("--latency")
        if self.pipeline > 1:
            argv += ["-s", str(PIPELINE_SCRIPT), url, "--", str(self.pipeline)]
        else:
            argv.append(url)
        return pinned(argv, self.cpu)

    def run(self, url: str) -> WrkResult:
        """Run wrk against url to completion and parse its report."""
        argv = self.argv(url)
        completed = subprocess.run(argv, capture_output=True, text=True)
        return self.parse(completed.returncode, completed.stdout, completed.stderr)

    def parse(self, returncode: int, stdout: str, stderr: str) -> WrkResult:
        """Check wrk's exit status and parse what it printed."""
        if returncode != 0:
            raise WrkFailed(f"wrk exited with status {returncode}: {stderr or stdout}")
        return parse_wrk(stdout, pipeline=self.pipeline)


def parse_wrk(report: str, *, pipeline: int = 1) -> WrkResult:
    """Parse the text wrk prints with --latency."""
    rps, total, avg = _RPS.search(report), _TOTAL.search(report), _AVG.search(report)
    transfer = _TRANSFER.search(report)
    percentiles = {m[1]: _ms(m[2], m[3]) for m in _PERCENTILE.finditer(report)}
    if not (rps and total and avg and transfer) or len(percentiles) != 4:
        raise WrkFailed(f"not a wrk --latency report:\n{report}")
    errors = _SOCKET_ERRORS.search(report)
    non_2xx = _NON_2XX.search(report)
    return WrkResult(
        requests_per_sec=float(rps[1]),
        requests=int(total[1]),
        duration_s=_ms(total[2], total[3]) / 1000,
        avg_ms=_ms(avg[1], avg[2]),
        p50_ms=percentiles["50"],
        p75_ms=percentiles["75"],
        p90_ms=percentiles["90"],
        p99_ms=percentiles["99"],
        transfer_bytes_per_sec=float(transfer[1]) * BYTES_PER_UNIT[transfer[2]],
        socket_errors=SocketErrors(*map(int, errors.groups())) if errors else SocketErrors(),
        non_2xx=int(non_2xx[1]) if non_2xx else 0,
        pipeline=pipeline,
    )


def _ms(value: str, unit: str) -> float:
    return float(value) * MS_PER_UNIT[unit]


def run_together(run: WrkRun, urls: dict[str, str]) -> dict[str, WrkResult]:
    """Run one wrk per URL at the same time; their results by name."""
    results: dict[str, WrkResult] = {}
    errors: list[BaseException] = []

    def drive(name: str, url: str) -> None:
        try:
            results[name] = run.run(url)
        except BaseException as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=item) for item in urls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
