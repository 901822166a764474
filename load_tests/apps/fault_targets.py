"""The app the HTTP fault experiments run: `socketify run load_tests.apps.fault_targets:server`.

`/ping` is the same answer as `ping.py`; `/pid` names the worker that answered, so an
experiment can tell a replacement worker from the one it killed. `impatient` serves the same
routes with a 2 s header deadline, so slowloris connections are cut within the experiment.
"""

import os

from socketify import Server

IMPATIENT_HEADER_TIMEOUT = 2.0


def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def pid(req, res):
    res.send(str(os.getpid()))


def build(server):
    """Register the routes on `server`."""
    server.get("/ping", ping)
    server.get("/pid", pid)
    return server


server = build(Server(compression=False))
impatient = build(Server(compression=False, header_timeout=IMPATIENT_HEADER_TIMEOUT))
