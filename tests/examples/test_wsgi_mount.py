"""examples/wsgi_mount: a Flask app under /legacy with one route moved, in-process and live."""

from __future__ import annotations

import pytest
import requests

from examples.wsgi_mount import server
from socketify.testing import TestClient
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(60)


def test_flask_answers_under_the_mount_and_the_moved_route_is_socketifys() -> None:
    client = TestClient(server)
    flask = client.get("/legacy/users/7")
    assert flask.json() == {"id": 7, "served_by": "flask", "mounted_at": "/legacy"}
    assert flask.headers["X-Powered-By"] == "socketify"
    assert client.get("/legacy/users/1").json() == {"id": 1, "served_by": "socketify"}
    assert client.post("/legacy/echo", data=b"12345").json() == {"received": 5}
    assert client.get("/elsewhere").status == 404


def test_the_mount_and_the_flask_app_alone_served_live(serve: Launcher) -> None:
    mounted = serve("examples.wsgi_mount:server")
    assert requests.get(f"{mounted.url}/legacy/users/7", timeout=5).json()["served_by"] == "flask"
    alone = serve("examples.wsgi_mount:legacy")
    answer = requests.get(f"{alone.url}/users/3", timeout=5).json()
    assert answer == {"id": 3, "served_by": "flask", "mounted_at": ""}
