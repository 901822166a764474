"""`socketify run` with a WSGI app: detection and `--wsgi`, clear errors, and the master's
features (several workers, HUP reload of new code, graceful stop, max-requests, TLS, the
access log) working for it as for a Socketify app.
"""

from __future__ import annotations

import signal
import ssl
import threading
from pathlib import Path

import pytest
import requests

from tests.support.pki import make_pki
from tests.support.raw_client import get
from tests.support.serve import Launcher, run_cli
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

APP = '''
import os, time

VERSION = {version!r}


def app(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        time.sleep(1.0)
    body = f"{{VERSION}} {{os.getpid()}} {{environ['SCRIPT_NAME']}}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


class Opaque:
    """A WSGI app whose signature says nothing: only --wsgi serves it."""

    def __call__(self, *args):
        return app(*args)


opaque = Opaque()
not_an_app = 42
'''


def write_app(directory: Path, version: str) -> None:
    (directory / "legacy_app.py").write_text(APP.format(version=version))


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "code"
    directory.mkdir()
    write_app(directory, "v1")
    return directory


def answers(server: object, path: str = "/") -> list[str]:
    return get(server.address, path).body.decode().split(" ")  # type: ignore[attr-defined]


def test_hup_reloads_new_code_and_keeps_the_root_path(serve: Launcher, app_dir: Path) -> None:
    server = serve(
        "legacy_app:app",
        workers=2,
        args=["--root-path", "/r", "--graceful-timeout", "3"],
        env={"PYTHONPATH": str(app_dir)},
    )
    assert answers(server)[0] == "v1"
    assert answers(server)[2] == "/r"
    write_app(app_dir, "v2")
    server.signal(signal.SIGHUP)
    wait_for(lambda: "reload complete" in server.output(), 15, message="the reload")
    wait_for(
        lambda: all(answers(server)[0] == "v2" for _ in range(10)), 10, message="v2 everywhere"
    )
    assert answers(server)[2] == "/r"


def test_max_requests_recycles_the_worker(serve: Launcher, app_dir: Path) -> None:
    server = serve("legacy_app:app", args=["--max-requests", "3"], env={"PYTHONPATH": str(app_dir)})
    first = answers(server)[1]

    def recycled() -> bool:
        return answers(server)[1] != first

    wait_for(recycled, 15, message="a new worker after 3 requests")


def test_a_graceful_stop_lets_a_request_in_flight_finish(serve: Launcher, app_dir: Path) -> None:
    server = serve("legacy_app:app", env={"PYTHONPATH": str(app_dir)})
    result: list[bytes] = []
    client = threading.Thread(target=lambda: result.append(get(server.address, "/slow").body))
    client.start()
    wait_for(lambda: len(server.workers()) == 1, 5)
    threading.Event().wait(0.3)  # the request is in the app
    server.signal(signal.SIGTERM)
    client.join(10)
    assert result and result[0].startswith(b"v1 ")
    assert server.wait_exit(10) == 0


def test_tls_and_the_access_log(serve: Launcher, app_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    pki = make_pki(tmp_path / "pki")
    context = ssl.create_default_context(cafile=pki.ca)
    server = serve(
        "legacy_app:app",
        args=[
            "--certfile", pki.server.cert, "--keyfile", pki.server.key,
            "--access-log-format", "common",
        ],
        env={"PYTHONPATH": str(app_dir)},
        tls=context,
    )  # fmt: skip
    response = requests.get(f"https://localhost:{server.port}/tls", verify=pki.ca, timeout=5)
    assert response.text.startswith("v1 ")
    wait_for(lambda: '"GET /tls HTTP/1.1" 200' in server.output(), 5, message="the access log")


def test_wsgi_flag_serves_an_app_whose_signature_says_nothing(
    serve: Launcher, app_dir: Path
) -> None:
    server = serve("legacy_app:opaque", args=["--wsgi"], env={"PYTHONPATH": str(app_dir)})
    assert answers(server)[0] == "v1"


@pytest.mark.parametrize(
    ("target", "extra", "message"),
    [
        (
            "legacy_app:not_an_app",
            (),
            "is a int, neither a socketify Server, a WSGI application nor a tcp.Service",
        ),
        ("legacy_app:missing", (), "has no attribute 'missing'"),
        ("legacy_app:app", ("--root-path", "r"), "--root-path must start with '/'"),
    ],
)
def test_what_cannot_be_served_is_said_in_one_line(
    app_dir: Path, target: str, extra: tuple[str, ...], message: str
) -> None:
    result = run_cli("run", target, "--workers", "1", *extra, env={"PYTHONPATH": str(app_dir)})
    assert result.returncode in (1, 2)
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_systemd_unit_passes_the_wsgi_options_on() -> None:
    result = run_cli(
        "systemd-unit",
        "legacy_app:app",
        "--factory",
        "--wsgi",
        "--root-path",
        "/shop",
        "--trust-proxy",
    )
    assert result.returncode == 0, result.stderr
    exec_start = next(line for line in result.stdout.splitlines() if line.startswith("ExecStart="))
    assert "run legacy_app:app" in exec_start
    assert exec_start.endswith(
        "--factory --wsgi --root-path /shop --trust-proxy --bind 127.0.0.1:8080"
    )
