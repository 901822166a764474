"""Testing helpers: the in-process `TestClient` and `LiveServer`, which runs the real CLI.

`TestClient(server)` runs requests through the app in this process; `client.websocket()` and
`client.sse()` keep the connection open after the upgrade. `LiveServer("module:server")` (also
the `live_server` pytest fixture) starts `socketify run` on a free port.
"""

from __future__ import annotations

from socketify.testing.client import LiveServer, TestClient
from socketify.testing.response import TestResponse

__all__ = ["LiveServer", "TestClient", "TestResponse"]
