"""Helpers shared by the test folders, one of each; import them as `tests.support.<module>`.

- `serve`: the real `socketify run` for a test (the `serve` fixture in tests/conftest.py),
  `run_cli` for commands that end by themselves;
- `raw_client`: raw HTTP/1.1 over a socket; `raw_websocket`: raw RFC 6455 frames;
  `raw_h2`: raw HTTP/2 frames, with the frame exchange in every failure;
- `ports`: a free port, IPv6 loopback; `wait`: `wait_for`, polling with a deadline;
- `processes`: children, process groups and states from /proc;
- `services`: skip, or fail under SOCKETIFY_REQUIRE_SERVICES=1, without a service, driver or
  program; `pki`: certificates; `sd_notify`: a fake systemd notification socket;
- `handle`: requests run through `Server.handle` without a socket; `wire`: a Response as the
  connection writes it; `browser`: headless Chromium; `apps.basic`: the default test app,
  `apps.http2`: the HTTP/2 tests' app.

Imports: every test folder is a package (it has an `__init__.py`, as `tests/` itself does),
and pytest runs in its default `prepend` import mode. So a test module is imported by its full
dotted name (`tests.server.test_wire_bodies`), with the repository root on sys.path: same-named
modules in two folders never collide, no conftest edits sys.path, and helpers, test apps and
`load_tests` are imported from the root (`from tests.support.raw_client import get`). Servers
started by `serve` get the root on PYTHONPATH, so the apps they run are named the same way
(`socketify run tests.server.tls_app:server`).
"""
