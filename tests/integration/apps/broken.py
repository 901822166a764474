"""An app whose import fails: `socketify run` must exit, not respawn forever."""

from __future__ import annotations

import a_module_that_does_not_exist  # noqa: F401

from socketify import Server

server = Server()
