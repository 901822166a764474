"""A socketify.py app (tests/socketify_py/chat_app.py) served by `socketify run` and by
`python chat_app.py`, exercised with requests and websockets.

`socketify run` runs it with two workers, so a publish reaches subscribers on the other one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import pytest
import requests
from websockets.sync.client import ClientConnection, connect

from tests.support.ports import free_port
from tests.support.serve import REPO, Launcher, ServerProcess, server_environment

pytestmark = pytest.mark.timeout(60)

APP = "tests.socketify_py.chat_app:app"


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    with Launcher(tmp_path_factory.mktemp("socketify-py")) as launcher:
        yield launcher


@pytest.fixture(scope="module")
def run_served(launcher: Launcher) -> ServerProcess:
    """`socketify run tests.socketify_py.chat_app:app --workers 2`."""
    return launcher(APP, workers=2)


@pytest.fixture(scope="module")
def script_served(launcher: Launcher) -> ServerProcess:
    """`python tests/socketify_py/chat_app.py`: its own app.listen(PORT) and app.run()."""
    port = free_port()
    server = launcher.spawn(
        [sys.executable, str(REPO / "tests" / "socketify_py" / "chat_app.py")],
        ("127.0.0.1", port),
        env={**server_environment(), "PORT": str(port)},
    )
    server.wait_output(rf"Listening on port http://localhost:{port} now")
    return server.wait_serving()


@pytest.fixture(scope="module", params=["socketify run", "python app.py"])
def live(request: pytest.FixtureRequest) -> ServerProcess:
    fixture = "run_served" if request.param == "socketify run" else "script_served"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


def test_a_plain_handler_ends_the_response(live: ServerProcess) -> None:
    answer = requests.get(f"{live.url}/", timeout=5)
    assert (answer.status_code, answer.text) == (200, "Hello, World!")


def test_parameters_query_and_headers_are_read_with_the_getters(live: ServerProcess) -> None:
    answer = requests.get(
        f"{live.url}/user/42", params={"tab": "posts"}, headers={"User-Agent": "t/1"}, timeout=5
    )
    assert answer.headers["X-User"] == "42"
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json() == {"id": "42", "tab": "posts", "agent": "t/1"}


def test_the_first_write_status_decides_and_send_writes_json(live: ServerProcess) -> None:
    answer = requests.post(f"{live.url}/items", timeout=5)
    assert answer.status_code == 201
    assert answer.json() == {"method": "POST", "url": "/items"}


def test_write_buffers_until_end(live: ServerProcess) -> None:
    answer = requests.get(f"{live.url}/teapot", timeout=5)
    assert (answer.status_code, answer.text, answer.headers["X-Kind"]) == (
        418,
        "short and stout",
        "tea",
    )


def test_async_handlers_await_sleep_and_the_json_body(live: ServerProcess) -> None:
    assert requests.get(f"{live.url}/slow", timeout=5).text == "slept"
    answer = requests.post(f"{live.url}/echo", json={"a": [1, 2]}, timeout=5)
    assert answer.json()["echo"] == {"a": [1, 2]}


def test_on_data_receives_the_body_in_pieces(live: ServerProcess) -> None:
    body = os.urandom(200_000)
    answer = requests.post(f"{live.url}/upload", data=iter([body[:5000], body[5000:]]))
    assert answer.text == f"{len(body)} bytes"


def test_the_error_handler_answers_a_failing_handler(live: ServerProcess) -> None:
    answer = requests.get(f"{live.url}/fails", timeout=5)
    assert (answer.status_code, answer.text) == (500, "handled: handler failure")
    assert requests.get(f"{live.url}/", timeout=5).status_code == 200


def test_a_websocket_opens_echoes_and_lists_its_topics(live: ServerProcess) -> None:
    with connect(f"ws://127.0.0.1:{live.port}/ws", open_timeout=5) as ws:
        assert str(ws.recv(timeout=5)).startswith("welcome from ")
        ws.send("topics")
        assert ws.recv(timeout=5) == "room"
        ws.send(b"\x00\xff")
        assert ws.recv(timeout=5) == b"\x00\xff"
        ws.send("plain text")
        assert ws.recv(timeout=5) == "plain text"


def test_ws_publish_reaches_the_other_subscribers_but_not_the_sender(live: ServerProcess) -> None:
    with (
        connect(f"ws://127.0.0.1:{live.port}/ws", open_timeout=5) as one,
        connect(f"ws://127.0.0.1:{live.port}/ws", open_timeout=5) as two,
    ):
        one.recv(timeout=5)
        two.recv(timeout=5)
        one.send("say hello")
        assert two.recv(timeout=5) == "hello"
        one.send("topics")  # the next message `one` gets is this answer, not its own publish
        assert one.recv(timeout=5) == "room"


def _worker_pid(ws: ClientConnection) -> int:
    ws.send("pid")
    return int(ws.recv(timeout=5))


def test_app_publish_reaches_subscribers_on_both_workers(run_served: ServerProcess) -> None:
    url = f"ws://127.0.0.1:{run_served.port}/ws"
    sockets: list[ClientConnection] = []
    by_worker: dict[int, ClientConnection] = {}
    with contextlib.ExitStack() as stack:
        # The kernel spreads connections over the two workers' SO_REUSEPORT sockets.
        while len(by_worker) < 2 and len(sockets) < 40:
            ws = stack.enter_context(connect(url, open_timeout=5))
            sockets.append(ws)
            ws.recv(timeout=5)
            by_worker.setdefault(_worker_pid(ws), ws)
        assert len(by_worker) == 2, "40 connections all landed on one worker"
        published = requests.get(
            f"{run_served.url}/broadcast", params={"text": "to everyone"}, timeout=5
        )
        assert published.text.startswith("published by ")
        for ws in sockets:
            assert ws.recv(timeout=5) == "to everyone"
