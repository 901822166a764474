"""Pytest plugin (auto-loaded when socketify is installed): the `live_server` fixture.

def test_ping(live_server):
    with live_server("myapp:server") as server:
        assert requests.get(server.url + "/ping").ok
"""

from __future__ import annotations

import pytest

from socketify.testing.client import live_server_fixture

live_server = pytest.fixture(live_server_fixture)
