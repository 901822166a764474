"""The app of the strict-edges tests: methods, Host, response header bytes, the JSON bound.

`server` keeps the defaults; `lenient` accepts bare LF line ends (`allow_bare_lf=True`).
"""

from __future__ import annotations

from socketify import Request, Response, Server

CONTROL_BYTES = {"soh": "\x01", "esc": "\x1b", "vt": "\x0b", "ff": "\x0c", "del": "\x7f"}


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def method(req: Request, res: Response) -> None:
    """Any method: the answer names the one that reached the handler."""
    res.send(f"{req.method} reached the any() route")


def host(req: Request, res: Response) -> None:
    res.send(req.host)


def bad_header(req: Request, res: Response) -> None:
    """A handler bug: a header value with a control byte (the name of which is the query)."""
    res.set_header("X-Note", "before" + CONTROL_BYTES[req.query["byte"]] + "after")
    res.send("never sent")


def json_items(req: Request, res: Response) -> None:
    res.json({"items": len(req.json())})


def register(app: Server) -> Server:
    app.get("/ping", ping)
    app.get("/only-get", ping)
    app.any("/dav", method)
    app.get("/host", host)
    app.get("/bad-header", bad_header)
    app.post("/json", json_items)
    return app


server = register(Server())
lenient = register(Server(allow_bare_lf=True))
