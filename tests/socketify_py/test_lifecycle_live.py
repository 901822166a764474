"""A socketify.py app that stops itself with `app.close()` from a handler, listens on a Unix
socket with `AppListenOptions(domain=...)`, and serves HTTPS with an encrypted key
(`AppOptions(passphrase=...)`): tests/socketify_py/lifecycle_app.py, run as its users run it."""

from __future__ import annotations

import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from tests.support.pki import make_pki
from tests.support.ports import free_port
from tests.support.raw_client import get
from tests.support.serve import REPO, Launcher, ServerProcess, server_environment

pytestmark = pytest.mark.timeout(90)

SCRIPT = str(REPO / "tests" / "socketify_py" / "lifecycle_app.py")
APP = "tests.socketify_py.lifecycle_app:app"
LIFESPAN = ("starting", "stopped", "closed")
STOP_WITHIN = 30.0  # generous: the graceful stop itself takes well under a second


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    with Launcher(tmp_path) as launcher:
        yield launcher


def script(launcher: Launcher, address: tuple[str, int] | str, **env: str) -> ServerProcess:
    """`python lifecycle_app.py` with `env`, once it says where it listens."""
    server = launcher.spawn([sys.executable, SCRIPT], address, env={**server_environment(), **env})
    server.wait_output("Listening on")
    return server


def assert_stops_after_answering(server: ServerProcess, tls: ssl.SSLContext | None = None) -> None:
    assert get(server.address, "/", tls=tls).text == "up"
    answer = get(server.address, "/shutdown", tls=tls)
    assert (answer.status, answer.text) == (200, "bye")
    assert server.wait_exit(STOP_WITHIN) == 0, server.output()
    assert server.group() == [], "workers left behind"


def test_app_close_from_a_handler_stops_the_script_after_the_answer(launcher: Launcher) -> None:
    port = free_port()
    server = script(launcher, ("127.0.0.1", port), PORT=str(port))
    server.wait_serving()
    assert f"Listening on port {port}" in server.output()
    assert_stops_after_answering(server)
    printed = [line for line in server.output().splitlines() if line in LIFESPAN]
    assert printed == ["starting", "stopped", "closed"]


def test_app_close_from_a_handler_stops_socketify_run(launcher: Launcher) -> None:
    server = launcher(APP, workers=2)
    assert_stops_after_answering(server)


def test_a_domain_listen_option_serves_on_a_unix_socket(launcher: Launcher, tmp_path: Path) -> None:
    path = str(tmp_path / "app.sock")
    server = script(launcher, path, SOCKET=path)
    server.wait_serving()
    assert f"Listening on {path}" in server.output()
    assert_stops_after_answering(server)


def test_an_encrypted_key_serves_https_with_its_passphrase(
    launcher: Launcher, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path)
    key = serialization.load_pem_private_key(Path(pki.server.key).read_bytes(), None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"1234"),
        )
    )
    client = ssl.create_default_context(cafile=pki.ca)
    port = free_port()
    env = {"PORT": str(port), "CERT": pki.server.cert, "KEY": str(encrypted)}
    server = script(launcher, ("127.0.0.1", port), **env, PASSPHRASE="1234")
    server.tls = client
    server.wait_serving()
    assert_stops_after_answering(server, tls=client)

    wrong = launcher.spawn(
        [sys.executable, SCRIPT],
        ("127.0.0.1", free_port()),
        env={**server_environment(), **env, "PASSPHRASE": "4321"},
    )
    assert wrong.wait_exit(STOP_WITHIN) not in (0, None)
    assert "cannot load" in wrong.output()
