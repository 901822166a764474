"""Our /ping app: `socketify run load_tests.apps.ping:server`."""

from socketify import Server

server = Server(compression=False)


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')
