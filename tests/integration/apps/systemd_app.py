"""The systemd tests' app: who answered, and what its environment says."""

from __future__ import annotations

import os

from socketify import Request, Response, Server

server = Server(graceful_timeout=3.0)


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")


@server.get("/pid")
def pid(req: Request, res: Response) -> None:
    res.send(f"{os.getpid()} {os.getppid()}")


@server.get("/env/:name")
def env(req: Request, res: Response) -> None:
    # Workers must not see the variables meant for the master (NOTIFY_SOCKET, LISTEN_*).
    res.send(os.environ.get(req.params["name"], "-"))
