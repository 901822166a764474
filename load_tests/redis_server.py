"""`PrivateRedis`: a `redis-server` of one's own, to stop, continue, kill and restart.

    with PrivateRedis.running() as redis:        # a free loopback port, no persistence
        os.environ["SOCKETIFY_STATE_URL"] = redis.url
        redis.pause()                            # SIGSTOP: connections open, no answers
        redis.resume()                           # SIGCONT
        redis.kill()                             # SIGKILL: connections refused
        redis.start()                            # again, on the same port, empty

The fault experiments and the outage tests use it, never the machine's shared Redis. The
server keeps nothing on disk (`--save "" --appendonly no`) and runs in its own process group,
so nothing it starts outlives the block.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from load_tests.harness import HOST, free_port

__all__ = ["PrivateRedis", "RedisMissing"]

READY_TIMEOUT = 10.0


class RedisMissing(RuntimeError):
    """No `redis-server` executable on PATH."""


class PrivateRedis:
    """One `redis-server` on `port` (loopback) that this process owns."""

    def __init__(self, port: int | None = None) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RedisMissing("redis-server is not installed (apt-get install redis-server)")
        self.executable = executable
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="private-redis-")

    @classmethod
    @contextlib.contextmanager
    def running(cls, port: int | None = None) -> Iterator[PrivateRedis]:
        """A started server, killed (and its directory removed) when the block exits."""
        redis = cls(port)
        try:
            redis.start()
            yield redis
        finally:
            redis.kill()
            redis.close()

    @property
    def url(self) -> str:
        """The `redis://` URL of database 0."""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def pid(self) -> int:
        """The server's pid (it must be running)."""
        if self.process is None:
            raise RuntimeError("the private redis-server is not running")
        return self.process.pid

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        if self.process is not None:
            raise RuntimeError("the private redis-server is already running")
        argv = [
            self.executable,
            "--port", str(self.port),
            "--bind", HOST,
            "--save", "",
            "--appendonly", "no",
            "--dir", self._dir.name,
            "--loglevel", "warning",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.02)

    def answers(self, timeout: float = 0.5) -> bool:
        """Whether the server answers PING within `timeout` seconds."""
        try:
            with socket.create_connection((HOST, self.port), timeout=timeout) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections, nothing answers them."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the server (a paused one too) and reap it; idempotent."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def close(self) -> None:
        """Kill the server and remove its working directory."""
        self.kill()
        self._dir.cleanup()
