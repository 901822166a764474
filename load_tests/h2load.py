"""Run h2load (nghttp2's HTTP/2 load generator) and parse its report.

h2load exits with status 0 even when no request succeeded (a server that answers the HTTP/2
preface with an HTTP/1.1 400 gives "0 done" and "0.00 req/s"), so the result carries the
counts that say so: `H2loadResult.problem` turns them into a sentence, and a caller must not
count a run that has one as a measurement. Durations come with the units us, ms, s, m or h and
are converted to seconds; the status code counts include the warm-up, the request counts and
the rate do not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from load_tests.harness import pinned

APT_HINT = "apt-get install nghttp2-client"
SECONDS_PER_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

_FINISHED = re.compile(r"^finished in ([\d.]+)(us|ms|s|m|h), ([\d.]+) req/s", re.M)
_REQUESTS = re.compile(
    r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
    r"(\d+) errored, (\d+) timeout",
    re.M,
)
_STATUS = re.compile(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", re.M)
# The exact byte counts are the numbers in parentheses; "headers" is followed by a savings note.
_TRAFFIC = re.compile(
    r"^traffic: \S+ \((\d+)\) total, \S+ \((\d+)\) headers[^,]*, \S+ \((\d+)\) data", re.M
)
_PROTOCOL = re.compile(r"^Application protocol: (\S+)", re.M)


class H2loadFailed(RuntimeError):
    """h2load is missing, exited with an error, or printed something that is not its report."""


@dataclass(frozen=True)
class H2loadResult:
    """The figures of one h2load run (requests and rate: measured period only)."""

    requests_per_sec: float
    duration_s: float
    total: int
    started: int
    done: int
    succeeded: int
    failed: int
    errored: int
    timeout: int
    status_2xx: int
    status_3xx: int
    status_4xx: int
    status_5xx: int
    traffic_bytes: int
    header_bytes: int
    data_bytes: int
    protocol: str | None  # "h2c", "h2" or "http/1.1"; None when nothing was negotiated

    @property
    def problem(self) -> str | None:
        """Why this run is not a clean measurement, or None when every request succeeded."""
        issues = []
        if self.succeeded == 0:
            issues.append(f"no request succeeded ({self.started} started, {self.done} done)")
        if self.failed or self.errored or self.timeout:
            issues.append(f"{self.failed} failed, {self.errored} errored, {self.timeout} timeout")
        if self.status_4xx or self.status_5xx:
            issues.append(f"{self.status_4xx} 4xx and {self.status_5xx} 5xx responses")
        return "; ".join(issues) or None


@dataclass(frozen=True)
class H2loadRun:
    """How to drive h2load: clients, streams per client, seconds, warm-up and an optional CPU."""

    clients: int
    streams: int
    duration: int
    warmup: int = 1
    threads: int = 1
    cpu: int | None = None

    def argv(self, url: str) -> list[str]:
        """The h2load command line for url (h2c by prior knowledge for http://, ALPN h2 else)."""
        if shutil.which("h2load") is None:
            raise H2loadFailed(f"h2load is not on PATH (Debian/Ubuntu: {APT_HINT})")
        argv = ["h2load", "-t", str(self.threads), "-c", str(self.clients)]
        argv += ["-m", str(self.streams), "-D", f"{self.duration}s"]
        if self.warmup:
            argv.append(f"--warm-up-time={self.warmup}s")
        return pinned([*argv, url], self.cpu)

    def run(self, url: str) -> H2loadResult:
        """Run h2load against url to completion and parse its report."""
        completed = subprocess.run(self.argv(url), capture_output=True, text=True)
        if completed.returncode != 0:
            raise H2loadFailed(
                f"h2load exited with status {completed.returncode}: "
                f"{(completed.stderr or completed.stdout).strip()[-600:]}"
            )
        return parse_h2load(completed.stdout)


def parse_h2load(report: str) -> H2loadResult:
    """Parse the text h2load prints at the end of a run."""
    finished, requests = _FINISHED.search(report), _REQUESTS.search(report)
    status, traffic = _STATUS.search(report), _TRAFFIC.search(report)
    if not (finished and requests and status and traffic):
        raise H2loadFailed(f"not an h2load report:\n{report}")
    protocol = _PROTOCOL.search(report)
    return H2loadResult(
        requests_per_sec=float(finished[3]),
        duration_s=float(finished[1]) * SECONDS_PER_UNIT[finished[2]],
        total=int(requests[1]),
        started=int(requests[2]),
        done=int(requests[3]),
        succeeded=int(requests[4]),
        failed=int(requests[5]),
        errored=int(requests[6]),
        timeout=int(requests[7]),
        status_2xx=int(status[1]),
        status_3xx=int(status[2]),
        status_4xx=int(status[3]),
        status_5xx=int(status[4]),
        traffic_bytes=int(traffic[1]),
        header_bytes=int(traffic[2]),
        data_bytes=int(traffic[3]),
        protocol=protocol[1] if protocol else None,
    )
