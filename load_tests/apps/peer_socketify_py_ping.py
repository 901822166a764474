"""Peer: socketify.py (uWebSockets) answering /ping (load_tests/.venv only).

    load_tests/.venv/bin/python load_tests/apps/peer_socketify_py_ping.py --port 8080 [--workers N]

Run as a script, never with this repository on the path: the PyPI package is also named
`socketify`. Each worker is one process with one uWebSockets loop; more than one are forked
and share the port (uWebSockets sets SO_REUSEPORT).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# This repository's `socketify` would shadow the PyPI package of the same name.
_repo = str(Path(__file__).resolve().parents[2])
sys.path[:] = [entry for entry in sys.path if entry.rstrip("/") != _repo]

from socketify import App  # noqa: E402


def ping(res, req):
    res.write_header(b"Content-Type", b"application/json")
    res.end(b'{"ok":true}')


def serve(port: int) -> None:
    app = App()
    app.get("/ping", ping)
    app.listen(port, lambda config: None)
    app.run()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.workers - 1):
        if os.fork() == 0:
            serve(args.port)
            os._exit(0)
    serve(args.port)


if __name__ == "__main__":
    main()
