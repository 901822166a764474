"""A real HAProxy in front of a test server: `haproxy -f CFG -db` on loopback, stopped after.

    with HaProxy(tmp_path, [Frontend(port, "127.0.0.1:8001", "send-proxy-v2")]) as proxy:
        ...  # clients connect to `port`; HAProxy relays in TCP mode with a PROXY header

Every frontend runs in TCP mode (what a cloud network load balancer does); `server_options`
is what HAProxy's `server` line takes (`send-proxy`, `send-proxy-v2`, `send-proxy-v2-ssl`,
`ssl verify none`...), `bind_options` what its `bind` line takes (`ssl crt FILE` ends TLS
at HAProxy). Without the `haproxy` program the test is skipped (failed under
SOCKETIFY_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.support.services import require_program
from tests.support.wait import wait_for

__all__ = ["Frontend", "HaProxy"]


@dataclass(frozen=True)
class Frontend:
    """One listening port of HAProxy and the backend address it relays to."""

    port: int
    backend: str  # HOST:PORT
    server_options: str = ""
    bind_options: str = ""


def config(frontends: Sequence[Frontend]) -> str:
    """The HAProxy configuration for `frontends`."""
    lines = [
        "global",
        "    maxconn 4096",
        "defaults",
        "    mode tcp",
        "    timeout connect 5s",
        "    timeout client 60s",
        "    timeout server 60s",
    ]
    for number, frontend in enumerate(frontends):
        lines += [
            f"frontend in{number}",
            f"    bind 127.0.0.1:{frontend.port} {frontend.bind_options}",
            f"    default_backend out{number}",
            f"backend out{number}",
            f"    server app {frontend.backend} {frontend.server_options}",
        ]
    return "\n".join(lines) + "\n"


class HaProxy:
    """HAProxy running `frontends` until the `with` block ends."""

    def __init__(self, directory: Path, frontends: Sequence[Frontend]) -> None:
        self.program = require_program("haproxy", "haproxy")
        self.frontends = list(frontends)
        self.config_path = directory / "haproxy.cfg"
        self.log_path = directory / "haproxy.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HaProxy:
        self.config_path.write_text(config(self.frontends))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [self.program, "-f", str(self.config_path), "-db"], stdout=log, stderr=log
            )
        for frontend in self.frontends:
            wait_for(
                lambda port=frontend.port: self._accepts(port),
                10.0,
                message=f"haproxy on port {frontend.port} ({self.output()})",
            )
        return self

    def _accepts(self, port: int) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"haproxy exited: {self.output()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
        except OSError:
            return False
        return True

    def output(self) -> str:
        """What HAProxy wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
