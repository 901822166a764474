"""Run the real `socketify` command for a test, as users run it, and make sure it goes away.

    def test_ping(serve: Launcher) -> None:
        server = serve("tests.support.apps.basic:server", workers=2)
        assert get(server.address, "/ping").body == b"pong"

`serve(app, ...)` (the fixture is a `Launcher`) starts `socketify run APP --bind ... --workers N`
on a free port in its own process group, with stdout and stderr in a log file, and waits until
every worker serves: the `listening on` line the master prints once all workers are ready, or,
when the command prints none, an answered request (over TLS when given a client context),
without waiting with `wait=False` (then `server.wait_serving()`). At teardown each server gets
SIGTERM; one that does not exit within STOP_TIMEOUT, or leaves processes of its group behind,
fails the test (and is SIGKILLed, so a failing test never leaves a server running).

Apps are named by their full dotted path (`tests.server.tls_app:server`). Every command runs
from the repository root with the root on PYTHONPATH (after any PYTHONPATH the test passes),
so test apps import the way the tests themselves do.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest

from socketify.testing.client import logs_startup
from tests.support.ports import free_port
from tests.support.processes import child_pids, group_pids
from tests.support.raw_client import Address, get
from tests.support.wait import wait_for

__all__ = [
    "BOOT_TIMEOUT",
    "PYTHON_ENV",
    "REPO",
    "SOCKETIFY",
    "STOP_TIMEOUT",
    "Launcher",
    "ServerProcess",
    "announces_start",
    "run_cli",
    "server_environment",
]

REPO = Path(__file__).resolve().parents[2]
BOOT_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
# The installed console script, next to this interpreter: the command users run.
SOCKETIFY = str(Path(sys.executable).with_name("socketify"))
DEFAULT_APP = "tests.support.apps.basic:server"
LISTENING = re.compile(r"listening on (\S+)")
# What server_environment() sets: a wrapper that filters the environment must pass these.
PYTHON_ENV = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")


def server_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with `env` over it, the repository root on PYTHONPATH."""
    environment = {**os.environ, **(env or {})}
    pythonpath = [env["PYTHONPATH"]] if env and env.get("PYTHONPATH") else []
    environment["PYTHONPATH"] = os.pathsep.join([*pythonpath, str(REPO)])
    environment["PYTHONDONTWRITEBYTECODE"] = "1"  # a rewritten module is never read stale
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path = REPO,
    timeout: float = 20.0,
) -> subprocess.CompletedProcess[str]:
    """Run `socketify ARGS` to completion (a command that is expected to end by itself)."""
    return subprocess.run(
        [SOCKETIFY, *args],
        cwd=cwd,
        env=server_environment(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def announces_start(args: Sequence[str]) -> bool:
    """Whether `socketify ARGS` prints its `listening on` line to its own stderr."""
    return bool(args) and args[0] == "run" and logs_startup(args)


class ServerProcess:
    """A command running in its own process group, stdout and stderr in a log file."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log_path: Path,
        address: Address,
        env: Mapping[str, str] | None = None,
        cwd: str | Path = REPO,
        tls: ssl.SSLContext | None = None,
        announces: bool = False,
    ) -> None:
        self.argv = [str(arg) for arg in argv]
        self.log_path = log_path
        self.address = address
        self.tls = tls
        self.announces = announces
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=server_environment(env),
            start_new_session=True,
        )

    def __repr__(self) -> str:
        return f"<ServerProcess {self.pid}: {' '.join(self.argv[1:])}>"

    @property
    def pid(self) -> int:
        """The pid of the command (the master, for `socketify run`)."""
        return self.proc.pid

    @property
    def tcp(self) -> tuple[str, int]:
        """The (host, port) of a TCP server."""
        assert not isinstance(self.address, str), "a Unix socket server"
        return self.address

    @property
    def port(self) -> int:
        """The TCP port."""
        return self.tcp[1]

    @property
    def url(self) -> str:
        """The base URL, e.g. `http://127.0.0.1:41234` (`https://` with TLS)."""
        host, port = self.tcp
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def output(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def wait_output(self, pattern: str, timeout: float = BOOT_TIMEOUT) -> re.Match[str]:
        """Wait until the output matches the regular expression `pattern`; fail if it exits."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.search(pattern, self.output())
            if match:
                return match
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} after {timeout}s:\n{self.output()}")
            time.sleep(0.05)

    def wait_listening(self, timeout: float = BOOT_TIMEOUT) -> str:
        """Wait for the `listening on ...` line; return the address it names."""
        return self.wait_output(LISTENING.pattern, timeout).group(1).rstrip(",")

    def wait_answering(self, timeout: float = BOOT_TIMEOUT, target: str = "/") -> None:
        """Wait until the address answers a GET (any status)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                get(self.address, target, timeout=2.0, tls=self.tls)
                return
            except (OSError, EOFError, AssertionError) as exc:
                last = exc
                time.sleep(0.05)
        raise AssertionError(f"server not answering after {timeout}s ({last!r}):\n{self.output()}")

    def wait_serving(self, timeout: float = BOOT_TIMEOUT) -> ServerProcess:
        """Wait until every worker serves.

        `socketify run` prints its start line once every worker is ready: that line is waited
        for when the command prints it (an answer alone may come from the first worker while
        the others still import the app), so the app sees no request it did not expect (a
        rate limit, an access log). Otherwise, until a request is answered.
        """
        if self.announces:
            self.wait_listening(timeout)
        else:
            self.wait_answering(timeout)
        return self

    def workers(self) -> list[int]:
        """Pids of the master's live worker processes."""
        return child_pids(self.pid)

    def group(self) -> list[int]:
        """Live processes of this server's process group (master and workers)."""
        return group_pids(self.pid)

    def signal(self, signum: int) -> None:
        """Send `signum` to the master."""
        os.kill(self.pid, signum)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status, or None if the process is still running after `timeout`."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Stop at the end of the block; a hung master or left workers fail the test."""
        problems = self.stop()
        if problems and kind is None:
            raise AssertionError("\n".join([*problems, self.output()[-4000:]]))

    def stop(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """SIGTERM the command and wait; return the problems found (hung, left processes).

        Anything of ours still running afterwards (a hung master, orphaned workers) is
        SIGKILLed by pid, so a failing test never leaves a server behind.
        """
        problems = []
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.signal(signal.SIGTERM)
            if self.wait_exit(timeout) is None:
                problems.append(f"did not exit within {timeout}s of SIGTERM")
                self.proc.kill()
                self.proc.wait(5)
        # Workers leave on their own once the master is gone (PDEATHSIG); give them a moment.
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not self.group(), 3.0, message="workers to exit")
        leftovers = self.group()
        if leftovers:
            problems.append(f"left processes running: {leftovers}")
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not self.group(), 5.0, message="the killed processes to go")
        self._log.close()
        return problems


class Launcher:
    """Starts servers for a test (or a module, as a context manager) and stops every one."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[ServerProcess] = []
        self._numbers = itertools.count()  # names the log files

    def __call__(
        self,
        app: str = DEFAULT_APP,
        *,
        workers: int = 1,
        bind: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path = REPO,
        tls: ssl.SSLContext | None = None,
        wait: bool = True,
    ) -> ServerProcess:
        """Run `socketify run APP --bind BIND --workers N ARGS...`; with `wait`, until it serves.

        Without `bind`, a free port on 127.0.0.1; `tls` is the client context the readiness
        probe (and `url`) use for a server that speaks HTTPS.
        """
        address: Address
        if bind is None:
            address = ("127.0.0.1", free_port())
            bind = f"127.0.0.1:{address[1]}"
        elif bind.startswith("unix:"):
            address = bind[len("unix:") :]
        else:
            authority = bind.partition("://")[2] or bind
            host, _, port = authority.rpartition(":")
            address = (host.strip("[]"), int(port))
        command = ["run", app, "--bind", bind, "--workers", str(workers), *args]
        return self.start(command, address, env=env, cwd=cwd, tls=tls, wait=wait)

    def start(
        self,
        command: Sequence[str],
        address: Address,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path = REPO,
        tls: ssl.SSLContext | None = None,
        wait: bool = True,
    ) -> ServerProcess:
        """Run `socketify COMMAND...` serving `address`; with `wait`, until it serves."""
        server = self.spawn(
            [SOCKETIFY, *command],
            address,
            env=env,
            cwd=cwd,
            tls=tls,
            announces=announces_start(command),
        )
        return server.wait_serving() if wait else server

    def spawn(
        self,
        argv: Sequence[str],
        address: Address,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path = REPO,
        tls: ssl.SSLContext | None = None,
        announces: bool = False,
    ) -> ServerProcess:
        """Start any command line that ends up serving `address` (a wrapper, a supervisor),
        without waiting; it is stopped with the others."""
        log_path = self.log_dir / f"server-{next(self._numbers)}.log"
        server = ServerProcess(
            argv, log_path=log_path, address=address, env=env, cwd=cwd, tls=tls,
            announces=announces,
        )  # fmt: skip
        self.started.append(server)
        return server

    def stop_all(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """Stop every server; return the problems found, each with the end of its log."""
        problems = []
        for server in self.started:
            found = server.stop(timeout)
            if found:
                command = "`" + " ".join([Path(server.argv[0]).name, *server.argv[1:]]) + "`"
                problems += [f"{command} {problem}" for problem in found]
                problems.append(server.output()[-4000:])
        self.started.clear()
        return problems

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        problems = self.stop_all()
        if problems and kind is None:
            pytest.fail("\n".join(problems), pytrace=False)
