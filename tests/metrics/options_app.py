"""A Server that turns metrics on itself: `Server(metrics_bind=...)` from $METRICS_BIND."""

from __future__ import annotations

import os

from socketify import Request, Response, Server

server = Server(metrics_bind=os.environ["METRICS_BIND"], metrics_buckets=(0.5, 5.0))


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")
