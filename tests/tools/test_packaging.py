"""The install story works as written: `python -m build` makes a wheel from the tracked files
alone, the wheel installs into a fresh virtualenv and serves hello world with HTTP/2 on, and
the sans-IO protocol and core suites pass on every Python the project supports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.serve import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not (REPO / ".git").exists(),
        reason="builds from a git checkout; this is a copy of its files (the compiled suite's)",
    ),
]

HELLO = """\
from socketify import Server

server = Server()


@server.get("/")
def index(req, res):
    res.send("hello from the wheel\\n")
"""
# The Pythons besides the one running the suite that a smoke subset runs on (pyenv's).
OTHER_PYTHONS = ("3.12", "3.13")
SMOKE_SUITES = ("tests/protocol", "tests/core")
SMOKE_TOOLS = (
    "pytest",
    "pytest-timeout",
    "hypothesis",
    "requests",
    "h2",
)  # h2: the reference client


def _clean_environment() -> dict[str, str]:
    """This environment without anything that would put the checkout on the import path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv, cwd=cwd, env=_clean_environment(), capture_output=True, text=True, timeout=540
    )
    assert result.returncode == 0, (
        f"{' '.join(argv)}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the files git tracks: a file missing there fails here."""
    source = tmp_path_factory.mktemp("source")
    tracked = _run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    # The pure wheel, which every supported Python installs (a compiled one is built for this
    # interpreter only; tests/tools/test_compiled_build.py checks that one).
    build = ["env", "SOCKETIFY_COMPILE=0", sys.executable, "-m", "build", "--wheel"]
    _run([*build, "--outdir", str(out), str(source)])
    (built,) = out.glob("socketify_gevent-*.whl")
    return built


def _virtualenv(python: str, where: Path, *packages: str) -> Path:
    _run([python, "-m", "venv", str(where)])
    _run([str(where / "bin" / "python"), "-m", "pip", "install", "-q", *packages])
    return where / "bin"


def test_the_wheel_installs_into_a_fresh_virtualenv_and_serves_hello_world(
    wheel: Path, tmp_path: Path
) -> None:
    bin_dir = _virtualenv(sys.executable, tmp_path / "venv", str(wheel))
    info = _run([str(bin_dir / "socketify"), "--info"]).stdout
    assert f"Distribution: socketify-gevent ({tmp_path / 'venv'}" in info  # not the checkout
    assert "HTTP/2: yes" in info
    # HTTP/2 is our own codec: the h2 library is a test tool, never installed with the wheel.
    no_h2 = "import importlib.util, sys; sys.exit(importlib.util.find_spec('h2') is not None)"
    _run([str(bin_dir / "python"), "-c", no_h2])
    app = tmp_path / "app"
    app.mkdir()
    (app / "hello.py").write_text(HELLO)
    port = free_port()
    server = subprocess.Popen(
        [str(bin_dir / "socketify"), "run", "hello:server", "--bind", f"127.0.0.1:{port}",
         "--workers", "1"],
        cwd=app, env=_clean_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        body = _get_when_up(f"http://127.0.0.1:{port}/", deadline=time.monotonic() + 30)
        assert body == b"hello from the wheel\n"
    finally:
        server.terminate()
        server.wait(30)


def _get_when_up(url: str, deadline: float) -> bytes:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize("version", OTHER_PYTHONS)
def test_the_protocol_and_core_suites_pass_on_other_pythons(
    wheel: Path, tmp_path: Path, version: str
) -> None:
    # pyenv's shims answer for the active version only: ask pyenv's folder first.
    python = _pyenv_python(version) or shutil.which(f"python{version}")
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    bin_dir = _virtualenv(python, tmp_path / "venv", f"{wheel}[templates]", *SMOKE_TOOLS)
    # The suites run from a copy of the tests only, so `socketify` comes from the wheel.
    work = tmp_path / "work"
    shutil.copytree(REPO / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", work / "pyproject.toml")
    result = subprocess.run(
        [str(bin_dir / "python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         *SMOKE_SUITES],
        cwd=work, env=_clean_environment(), capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _pyenv_python(version: str) -> str | None:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(root.glob(f"{version}.*/bin/python{version}"))
    return str(found[-1]) if found else None
