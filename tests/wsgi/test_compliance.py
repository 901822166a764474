"""PEP 3333 compliance: `wsgiref.validate.validator` wraps a test app and asserts, while we
serve it, what the server must do (environ keys and types, the input and error streams,
start_response's arguments, the iterable closed). It raises on any breach, which the server
turns into a 500, so a 200 with the expected body means every check passed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import requests

from socketify import Server
from socketify.testing import TestClient
from tests.support.serve import Launcher, ServerProcess
from tests.wsgi.apps import validated

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("validated")) as launch:
        yield launch("tests.wsgi.apps:validated", args=("--wsgi",))


def test_the_validator_passes_in_process() -> None:
    app = Server()
    app.mount("/v", validated)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # wsgiref reports some breaches as warnings
        response = TestClient(app).post("/v/x", data=b"payload")
    assert response.status == 200, response.text
    assert response.text == "REQUEST_METHOD=POST\nSCRIPT_NAME=/v\nPATH_INFO=/x\nbody=payload"


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE", "PROPFIND", "REPORT", "PURGE"])
def test_the_validator_passes_on_the_live_server(server: ServerProcess, method: str) -> None:
    response = requests.request(method, f"{server.url}/a%20b", data=b"x" * 10_000, timeout=5)
    assert response.status_code == 200, server.output()
    assert response.text.endswith("body=" + "x" * 10_000)
    assert f"REQUEST_METHOD={method}\nSCRIPT_NAME=\nPATH_INFO=/a b\n" in response.text
    assert "Traceback" not in server.output()


def test_the_validator_passes_for_a_chunked_body(server: ServerProcess) -> None:
    response = requests.post(server.url, data=iter([b"one", b"two"]), timeout=5)
    assert response.status_code == 200, server.output()
    assert response.text.endswith("body=onetwo")
