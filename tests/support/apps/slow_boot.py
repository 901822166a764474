"""An app whose import outlasts a short heartbeat timeout, like a large real application."""

from __future__ import annotations

import os
import sys
import time

from socketify import Request, Response, Server

# A blocking wait, as a CPU-bound import would be: in a worker, time.sleep is gevent's by now.
if "gevent" in sys.modules:
    from gevent import monkey

    monkey.get_original("time", "sleep")(float(os.environ.get("SLOW_BOOT_SECONDS", "0")))
else:
    time.sleep(float(os.environ.get("SLOW_BOOT_SECONDS", "0")))

server = Server()


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send(f"pong {os.getpid()}")
