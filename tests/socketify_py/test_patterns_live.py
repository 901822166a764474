"""socketify.py's example patterns (tests/socketify_py/patterns_app.py), served by
`socketify run` and by `python patterns_app.py`, asked with real clients."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.ports import free_port
from tests.support.serve import REPO, Launcher, ServerProcess, server_environment
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(90)

APP = "tests.socketify_py.patterns_app:app"
ABORT_NOTICED_WITHIN = 20.0  # generous: the server notices at its next write
SOURCE = (REPO / "tests" / "socketify_py" / "patterns_app.py").read_bytes()


def pattern(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    with Launcher(tmp_path_factory.mktemp("socketify-py-patterns")) as launcher:
        yield launcher


@pytest.fixture(scope="module")
def aborts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file the app's on_aborted handler appends a line to."""
    return tmp_path_factory.mktemp("aborts") / "aborts.txt"


@pytest.fixture(scope="module", params=["socketify run", "python app.py"])
def live(request: pytest.FixtureRequest, launcher: Launcher, aborts: Path) -> ServerProcess:
    env = {**server_environment(), "ABORTS_FILE": str(aborts)}
    if request.param == "socketify run":
        return launcher(APP, workers=2, env=env)
    port = free_port()
    server = launcher.spawn(
        [sys.executable, str(REPO / "tests" / "socketify_py" / "patterns_app.py")],
        ("127.0.0.1", port),
        env={**env, "PORT": str(port)},
    )
    server.wait_output(rf"Listening on port http://localhost:{port} now")
    return server.wait_serving()


def get(live: ServerProcess, path: str, **kwargs: object) -> requests.Response:
    return requests.get(live.url + path, timeout=10, **kwargs)  # type: ignore[arg-type]


def test_a_route_that_yields_passes_the_request_to_the_next_match(live: ServerProcess) -> None:
    assert get(live, "/item/42").text == "item 42"
    answer = get(live, "/item/abc")
    assert (answer.status_code, answer.text) == (404, "nothing at /item/abc")


def test_the_error_handler_gets_error_res_req_for_plain_and_async_handlers(
    live: ServerProcess,
) -> None:
    answer = get(live, "/broken")
    assert (answer.status_code, answer.text) == (500, "LookupError on /broken")
    answer = get(live, "/broken_later")
    assert (answer.status_code, answer.text) == (500, "TimeoutError on /broken_later")


def test_a_middleware_chain_passes_data_and_stops_on_a_falsy_return(live: ServerProcess) -> None:
    refused = get(live, "/private")
    assert (refused.status_code, refused.text) == (401, "who are you?")
    answer = get(live, "/private", headers={"X-Token": "t1"})
    assert answer.json() == {"token": "t1", "stamped": True}
    assert answer.headers["Content-Type"] == "application/json"


def test_a_middleware_router_puts_its_functions_before_each_route(live: ServerProcess) -> None:
    assert get(live, "/router/private").status_code == 401
    answer = requests.post(live.url + "/router/private", headers={"X-Token": "t2"}, timeout=10)
    assert answer.json() == {"token": "t2"}


def test_res_render_answers_html_from_the_app_template_engine(live: ServerProcess) -> None:
    answer = get(live, "/page", params={"name": "<Ada>"})
    assert answer.headers["Content-Type"].startswith("text/html")
    assert answer.text == "<h1>Hello, &lt;Ada&gt;</h1>"


@pytest.mark.parametrize("size", [0, 1, 16 * 1024, 100_000, 1_000_003])
def test_send_chunk_streams_a_body_of_known_size(live: ServerProcess, size: int) -> None:
    answer = get(live, f"/pieces?size={size}")
    assert answer.status_code == 200
    assert answer.headers["Content-Length"] == str(size)
    assert answer.content == pattern(size)


def test_try_end_and_on_writable_stream_a_body_from_a_plain_handler(live: ServerProcess) -> None:
    answer = get(live, "/offered?size=300000")
    assert (answer.headers["X-Handler"], answer.headers["Content-Length"]) == ("sync", "300000")
    assert answer.content == pattern(300_000)


def test_a_client_that_leaves_a_stream_does_not_hurt_the_server(live: ServerProcess) -> None:
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
            sock.sendall(b"GET /pieces?size=5000000 HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    assert get(live, "/pieces?size=1000").content == pattern(1000)


def test_a_client_that_leaves_sets_aborted_and_calls_on_aborted(
    live: ServerProcess, aborts: Path
) -> None:
    before = aborts.read_text().count("aborted") if aborts.exists() else 0
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(b"GET /endless HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    wait_for(
        lambda: aborts.exists() and aborts.read_text().count("aborted") == before + 1,
        ABORT_NOTICED_WITHIN,
        message="the on_aborted handler",
    )
    assert get(live, "/item/1").text == "item 1"  # the worker serves on


def test_on_data_in_an_async_handler_resolves_a_future_of_the_app_loop(
    live: ServerProcess,
) -> None:
    body = b"x" * 250_000
    answer = requests.post(live.url + "/counted", data=iter([body[:1000], body[1000:]]), timeout=10)
    assert answer.text == "250000 bytes"


def test_sendfile_answers_the_file_with_ranges_and_304(live: ServerProcess) -> None:
    whole = get(live, "/source")
    assert whole.content == SOURCE and whole.headers["Accept-Ranges"] == "bytes"
    part = get(live, "/source", headers={"Range": "bytes=10-19"})
    assert (part.status_code, part.content) == (206, SOURCE[10:20])
    since = {"If-Modified-Since": whole.headers["Last-Modified"]}
    assert get(live, "/source", headers=since).status_code == 304
    assert get(live, "/source", headers={"Range": "bytes=999999-"}).status_code == 416


def test_a_ws_upgrade_behavior_accepts_with_user_data_or_refuses(live: ServerProcess) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://127.0.0.1:{live.port}/chat", open_timeout=10)
    assert refused.value.response.status_code == 403
    with connect(f"ws://127.0.0.1:{live.port}/chat?name=ada", open_timeout=10) as ws:
        assert ws.recv(timeout=10) == "hello ada"
        assert json.loads(ws.recv(timeout=10)) == {"topic": "room", "now": 1, "before": 0}


def test_an_async_upgrade_behavior_upgrades_after_it_awaited(live: ServerProcess) -> None:
    with connect(f"ws://127.0.0.1:{live.port}/late", open_timeout=10) as ws:
        assert ws.recv(timeout=10) == "hello late"


def test_drain_follows_an_open_that_sent_until_the_socket_pushed_back(
    live: ServerProcess,
) -> None:
    with connect(f"ws://127.0.0.1:{live.port}/flood", open_timeout=10) as ws:
        got = [ws.recv(timeout=10) for _ in range(2000)]
    assert got == [f"message {n}" for n in range(2000)]


def test_a_ws_route_passes_a_plain_request_on_to_the_next_route(live: ServerProcess) -> None:
    answer = get(live, "/chat")
    assert (answer.status_code, answer.text) == (404, "nothing at /chat")
    assert get(live, "/").text == "not a WebSocket"


def test_publish_skips_the_sender_and_subscription_reports_the_leave(
    launcher: Launcher, tmp_path: Path
) -> None:
    # One worker, so both connections and their counts are on it.
    server = launcher(APP, workers=1)
    url = f"ws://127.0.0.1:{server.port}/chat"
    with connect(url + "?name=ada", open_timeout=10) as ada:
        ada.recv(timeout=10), ada.recv(timeout=10)  # hello, subscribed
        with connect(url + "?name=bob", open_timeout=10) as bob:
            bob.recv(timeout=10)
            assert json.loads(bob.recv(timeout=10)) == {"topic": "room", "now": 2, "before": 1}
            bob.send("hi")
            assert ada.recv(timeout=10) == "bob: hi"
            with contextlib.suppress(TimeoutError):
                raise AssertionError(f"the sender got {bob.recv(timeout=0.5)!r}")
            bob.send("leave")
            assert json.loads(bob.recv(timeout=10)) == {"topic": "room", "now": 1, "before": 2}
    server.stop()
