"""Static files for the nginx comparison: `socketify run load_tests.apps.static_site:server`.

Serves $STATIC_ROOT at / with the default options (ETag, Last-Modified, ranges, sendfile), no
other middleware; /ping answers so the harness can tell when the server is up.
"""

from __future__ import annotations

import os

from socketify import Request, Response, Server, static_files

server = Server()
server.use(static_files.serve(os.environ.get("STATIC_ROOT", "."), fallthrough=True))


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')
