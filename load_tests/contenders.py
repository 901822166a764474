"""The servers we compare on /ping, and the virtualenv that holds the peers.

Peers are never project dependencies: they live in `load_tests/.venv` (git-ignored), which
`setup_peers()` creates only when asked, saying what it installs and why. Every contender binds
127.0.0.1 and answers GET /ping with `{"ok":true}` as application/json on a keep-alive
connection; `harness.probe_response` shows how many bytes of headers each adds around that.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from load_tests.harness import HOST, LOAD_TESTS, REPO_ROOT

VENV = LOAD_TESTS / ".venv"
VENV_BIN = VENV / "bin"
# gunicorn's gevent worker imports packaging without declaring it (gunicorn 27).
PEER_PACKAGES = (
    "uvicorn[standard]", "httptools", "uvloop", "gunicorn", "packaging", "gevent", "flask",
    "hypercorn", "granian",
    # The TechEmpower peers (load_tests/tfb).
    "django", "sqlalchemy", "asyncpg", "fastapi", "starlette", "psycopg2-binary", "psycogreen",
    "orjson", "jinja2", "socketify",
)  # fmt: skip
OURS = "socketify"


@dataclass(frozen=True)
class Contender:
    """One server under test: how to start it with N workers on a port."""

    name: str
    description: str
    command: Callable[[int, int], list[str]]  # (port, workers) -> argv
    modules: tuple[str, ...] = ()  # what it imports from the peers' virtualenv

    @property
    def is_peer(self) -> bool:
        """Whether it runs from the peers' virtualenv rather than the project's interpreter."""
        return self.name != OURS


def _socketify(port: int, workers: int) -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    app = "load_tests.apps.ping:server"
    return [*cli, "run", app, "--workers", str(workers), "--bind", f"{HOST}:{port}"]


def _uvicorn(port: int, workers: int) -> list[str]:
    return [
        str(VENV_BIN / "uvicorn"), "load_tests.apps.asgi_raw:app",
        "--host", HOST, "--port", str(port), "--workers", str(workers),
        "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip


def _gunicorn_gevent(app: str) -> Callable[[int, int], list[str]]:
    def command(port: int, workers: int) -> list[str]:
        return [
            str(VENV_BIN / "gunicorn"), app, "-k", "gevent", "--workers", str(workers),
            "--bind", f"{HOST}:{port}", "--log-level", "warning",
        ]  # fmt: skip

    return command


def _hypercorn(port: int, workers: int) -> list[str]:
    return [
        str(VENV_BIN / "hypercorn"), "load_tests.apps.asgi_raw:app",
        "--bind", f"{HOST}:{port}", "--workers", str(workers), "--worker-class", "uvloop",
        "--log-level", "warning",
    ]  # fmt: skip


def _socketify_py(port: int, workers: int) -> list[str]:
    # A script, not `-m`: the PyPI package is also named `socketify` (the script drops this
    # tree from its path).
    script = LOAD_TESTS / "apps" / "peer_socketify_py_ping.py"
    return [str(VENV_BIN / "python"), str(script), "--port", str(port), "--workers", str(workers)]


def _gevent_ceiling(port: int, workers: int) -> list[str]:
    module = "load_tests.apps.gevent_ceiling"
    return [
        str(VENV_BIN / "python"), "-m", module, "--bind", f"{HOST}:{port}",
        "--workers", str(workers),
    ]  # fmt: skip


CONTENDERS = {
    contender.name: contender
    for contender in (
        Contender(OURS, "ours: socketify run load_tests.apps.ping:server", _socketify),
        Contender(
            "uvicorn-asgi",
            "uvicorn + httptools + uvloop, raw ASGI app",
            _uvicorn,
            ("uvicorn", "httptools", "uvloop"),
        ),
        Contender(
            "socketify.py",
            "socketify.py (uWebSockets, C++), the same /ping answer",
            _socketify_py,
            ("socketify.native",),  # socketify.py's module, not in this tree's package
        ),
        Contender(
            "gunicorn-gevent-wsgi",
            "gunicorn -k gevent, raw WSGI app",
            _gunicorn_gevent("load_tests.apps.wsgi_raw:app"),
            ("gunicorn.workers.ggevent", "gevent"),
        ),
        Contender(
            "gunicorn-gevent-flask",
            "gunicorn -k gevent, Flask app",
            _gunicorn_gevent("load_tests.apps.flask_ping:app"),
            ("gunicorn.workers.ggevent", "gevent", "flask"),
        ),
        Contender(
            "gevent-ceiling",
            "gevent StreamServer, fixed response, no parser",
            _gevent_ceiling,
            ("gevent",),
        ),
        Contender(
            "hypercorn-asgi",
            "hypercorn + uvloop, raw ASGI app (HTTP/1.1, and h2c by prior knowledge)",
            _hypercorn,
            ("hypercorn", "h2", "uvloop"),
        ),
    )
}


def peers_missing(modules: Iterable[str]) -> str | None:
    """Why the peers' virtualenv cannot import these modules, or None when it can."""
    python = VENV_BIN / "python"
    if not python.exists():
        return f"{VENV} does not exist"
    # Run outside the repository: `-c` puts the working directory first on sys.path, where
    # this tree's `socketify` would shadow socketify.py's package of the same name.
    check = subprocess.run(
        [str(python), "-c", f"import {', '.join(sorted(set(modules)))}"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    if check.returncode != 0:
        return f"{VENV} lacks a peer: {check.stderr.strip().splitlines()[-1]}"
    return None


def ensure_peers(contenders: Iterable[Contender], *, setup: bool) -> str | None:
    """Make the peers' virtualenv usable if these contenders need it; say what is wrong if not.

    Without setup nothing is installed: the answer explains what --setup would install and why.
    """
    peers = [c for c in contenders if c.is_peer]
    if not peers or not (missing := peers_missing(m for c in peers for m in c.modules)):
        return None
    if not setup:
        return (
            f"The peer servers are not installed ({missing}).\n"
            f"Run again with --setup to create {VENV.relative_to(REPO_ROOT)} and install into it "
            f"{', '.join(PEER_PACKAGES)} (for comparison only, not project dependencies), "
            f"or use --only {OURS}."
        )
    setup_peers()
    return None


def setup_peers() -> None:
    """Create the peers' virtualenv and install the peer servers into it, saying so."""
    print(
        f"Installing the peer servers into {VENV} (comparison only, not project dependencies):\n"
        f"  {' '.join(PEER_PACKAGES)}",
        flush=True,
    )
    if not (VENV_BIN / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV_BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    subprocess.run([*pip, "--quiet", *PEER_PACKAGES], check=True)
