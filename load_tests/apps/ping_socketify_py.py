"""Our /ping written against socketify.py's API.

    socketify run load_tests.apps.ping_socketify_py:app

The same answer as `load_tests.apps.ping` (the native Server) and as
`load_tests/apps/peer_socketify_py_ping.py` (socketify.py itself), so the three compare the
cost of the API and of the server, not of the answer.
"""

from socketify import App

app = App(compression=False)


def ping(res, req):
    res.write_header("Content-Type", "application/json")
    res.end(b'{"ok":true}')


app.get("/ping", ping)
