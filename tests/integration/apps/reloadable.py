"""An app that serves what a module written by the test says; HUP must pick up a new one."""

from __future__ import annotations

import os

import reload_payload  # written by the test into a directory on PYTHONPATH

from socketify import Request, Response, Server

server = Server(header_timeout=1.0, idle_timeout=2.0, graceful_timeout=3.0)


@server.get("/version")
def version(req: Request, res: Response) -> None:
    res.send(reload_payload.VERSION)


@server.get("/pid")
def pid(req: Request, res: Response) -> None:
    res.send(str(os.getpid()))


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")
