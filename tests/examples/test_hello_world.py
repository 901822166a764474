"""examples/hello_world.py: its three routes through `socketify run` and `python -m`."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import requests

from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module", params=["socketify run", "python -m"])
def hello(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("hello")) as launcher:
        if request.param == "socketify run":
            yield launcher("examples.hello_world:server", workers=2)
        else:
            port = free_port()
            argv = [sys.executable, "-m", "examples.hello_world"]
            server = launcher.spawn(argv, ("127.0.0.1", port), env={"PORT": str(port)})
            server.wait_serving().wait_output(rf"Serving on http://127\.0\.0\.1:{port}")
            yield server


def test_hello_world_by_name_and_as_json(hello: ServerProcess) -> None:
    index = requests.get(hello.url + "/", timeout=5)
    assert (index.status_code, index.text) == (200, "Hello, world!\n")
    assert index.headers["Content-Type"].startswith("text/plain")
    assert requests.get(hello.url + "/hello/ada", timeout=5).text == "Hello, ada!\n"
    answer = requests.get(hello.url + "/json", timeout=5)
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.content == b'{"framework":"socketify","message":"hello"}'
    assert requests.get(hello.url + "/nope", timeout=5).status_code == 404
