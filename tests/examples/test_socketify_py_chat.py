"""examples/socketify_py_chat: socketify.py-style routes and topics, in-process and through
`socketify run` with two workers."""

from __future__ import annotations

import pytest
import requests

from examples.socketify_py_chat import app
from socketify.testing import TestClient
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(60)


def test_the_routes_answer_with_res_req_handlers() -> None:
    client = TestClient(app)
    assert client.get("/").text == "Hello from a socketify.py app!"
    assert client.get("/online").json() == {"online": 0}


def test_a_message_reaches_the_other_subscribers_but_not_its_sender() -> None:
    client = TestClient(app)
    with client.websocket("/chat") as ada, client.websocket("/chat") as bob:
        assert (ada.receive_text(), bob.receive_text()) == ("welcome", "welcome")
        assert client.get("/online").json() == {"online": 2}
        ada.send_text("hello bob")
        assert bob.receive_text() == "hello bob"
        bob.send_text("hello ada")
        assert ada.receive_text() == "hello ada"  # not "hello bob": publish skips the sender
    assert client.get("/online").json() == {"online": 0}


def test_the_app_serves_under_socketify_run(serve: Launcher) -> None:
    running = serve("examples.socketify_py_chat:app", workers=2)
    assert requests.get(running.url + "/", timeout=5).text == "Hello from a socketify.py app!"
    assert requests.get(running.url + "/online", timeout=5).json() == {"online": 0}
