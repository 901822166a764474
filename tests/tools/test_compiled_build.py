"""The compiled build is the same package, faster: it builds from the tracked files, says what
it compiled, serves concurrent requests across greenlet switches, and keeps tracebacks and
`sys.setprofile`-based profilers working. (CI runs the whole suite on it: .ci/compiled-suite.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import urllib.request
from pathlib import Path

import pytest

from socketify.compiled import HOT_MODULES
from tests.support.compiled_build import (
    build_wheel,
    compiled_members,
    copy_tracked_files,
    lay_compiled_tree,
)
from tests.support.serve import REPO, Launcher

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(
        not (REPO / ".git").exists(),
        reason="builds from a git checkout; this is a copy of its files (the compiled suite's)",
    ),
]

HOT_NAMES = [path.removesuffix(".py").replace("/", ".") for path in HOT_MODULES]


@pytest.fixture(scope="module")
def compiled_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout with the compiled wheel's extension modules beside the sources."""
    tree = tmp_path_factory.mktemp("compiled")
    if not lay_compiled_tree(tree):
        pytest.fail("the wheel holds no compiled module although a C compiler is here")
    return tree


def _python(tree: Path, code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tree, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_info_names_every_compiled_module(compiled_tree: Path) -> None:
    out = _python(compiled_tree, "from socketify.cli import info; print(info())")
    (line,) = [line for line in out.splitlines() if line.startswith("Compiled:")]
    assert line == f"Compiled: {', '.join(HOT_NAMES)}"


def test_a_parse_error_traceback_names_the_compiled_source_lines(compiled_tree: Path) -> None:
    out = _python(
        compiled_tree,
        """
        import traceback
        from socketify.protocol.http11 import ParseError, ServerConnection

        conn = ServerConnection()
        conn.receive_data(b"GET / HTTP/1.1\\r\\nHost: a\\r\\nno colon here\\r\\n\\r\\n")
        try:
            conn.next_event()
        except ParseError as error:
            for frame in traceback.extract_tb(error.__traceback__):
                print(frame.filename, frame.lineno, frame.name)
        """,
    )
    frames = [line.split() for line in out.splitlines()]
    assert any(
        name.endswith("http11/parser.py") and int(line) > 0 and function == "next_event"
        for name, line, function in frames
    ), out


def test_cprofile_and_setprofile_run_over_compiled_code(compiled_tree: Path) -> None:
    out = _python(
        compiled_tree,
        """
        import cProfile, pstats, sys
        from socketify import Server
        from socketify.testing import TestClient

        server = Server()

        @server.get("/ping")
        def ping(req, res):
            res.send("pong")

        calls = []
        sys.setprofile(lambda frame, event, arg: calls.append(event))
        TestClient(server).get("/ping")
        sys.setprofile(None)
        profiler = cProfile.Profile()
        answer = profiler.runcall(TestClient(server).get, "/ping")
        functions = {name for _, _, name in pstats.Stats(profiler).stats}
        print(answer.status, answer.text, "ping" in functions, "call" in calls)
        """,
    )
    assert out.split() == ["200", "pong", "True", "True"]


def test_the_compiled_server_answers_requests_parked_in_other_greenlets(
    compiled_tree: Path, serve: Launcher
) -> None:
    server = serve(env={"PYTHONPATH": str(compiled_tree)}, cwd=compiled_tree)
    answers: list[bytes] = []

    def sleeper() -> None:
        with urllib.request.urlopen(f"{server.url}/sleep?s=1", timeout=30) as answer:
            answers.append(answer.read())

    parked = [threading.Thread(target=sleeper) for _ in range(4)]
    for thread in parked:
        thread.start()
    with urllib.request.urlopen(f"{server.url}/pid", timeout=30) as answer:
        worker = int(answer.read())
    for thread in parked:
        thread.join(30)
    assert answers == [b"slept 1.0"] * 4
    # The worker that answered runs the compiled modules: mypyc's library of them is mapped in.
    mapped = {line.split()[-1] for line in Path(f"/proc/{worker}/maps").read_text().splitlines()}
    assert any(path.startswith(f"{compiled_tree}/") and "__mypyc." in path for path in mapped)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tracked files, to build from."""
    tree = tmp_path_factory.mktemp("source")
    copy_tracked_files(tree)
    return tree


def test_without_a_c_compiler_the_wheel_is_pure_python_and_says_so_in_one_line(
    source: Path, tmp_path: Path
) -> None:
    wheel, log = build_wheel(source, tmp_path, {"CC": "/bin/false", "SOCKETIFY_COMPILE": "1"})
    assert compiled_members(wheel) == []
    # pip indents what the build prints
    notices = [line.strip() for line in log.splitlines() if "socketify: building pure" in line]
    assert len(notices) == 1, log[-3000:]
    assert "no working C compiler" in notices[0]


def test_socketify_compile_0_builds_a_pure_python_wheel(source: Path, tmp_path: Path) -> None:
    wheel, _ = build_wheel(source, tmp_path, {"SOCKETIFY_COMPILE": "0"})
    assert compiled_members(wheel) == []
    assert wheel.name.endswith("-py3-none-any.whl")


def test_an_editable_install_stays_pure_python(source: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", venv], check=True, timeout=120
    )
    subprocess.run(
        [venv / "bin" / "pip", "install", "-q", "--no-deps", "-e", source],
        check=True, timeout=1200,
    )  # fmt: skip
    assert not list((source / "socketify").rglob("*.so"))
    info = subprocess.run(
        [venv / "bin" / "socketify", "--info"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert f"Distribution: socketify-gevent ({source}" in info
    assert "Compiled: no (pure Python)" in info
