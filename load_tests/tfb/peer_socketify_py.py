"""Peer: socketify.py (uWebSockets) for `/json` and `/plaintext` (load_tests/.venv only).

    python load_tests/tfb/peer_socketify_py.py --port 8080 --workers 2

Run as a script, never with this repository on the path: the PyPI package is also named
`socketify`. Each worker is a forked process listening on the same port (uWebSockets sets
SO_REUSEPORT). uWebSockets sends its own `Server` and `Date` headers.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# This repository's `socketify` would shadow the PyPI package of the same name.
_repo = str(Path(__file__).resolve().parents[2])
sys.path[:] = [entry for entry in sys.path if entry.rstrip("/") != _repo]

import orjson  # noqa: E402

from socketify import App  # noqa: E402

JSON = b"application/json"
TEXT = b"text/plain"


def json(res, req):
    res.write_header(b"Content-Type", JSON)
    res.end(orjson.dumps({"message": "Hello, World!"}))


def plaintext(res, req):
    res.write_header(b"Content-Type", TEXT)
    res.end(b"Hello, World!")


def serve(port: int) -> None:
    app = App()
    app.get("/json", json)
    app.get("/plaintext", plaintext)
    app.listen(port, lambda config: None)
    app.run()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    children = []
    for _ in range(args.workers - 1):
        pid = os.fork()
        if pid == 0:
            serve(args.port)
            os._exit(0)
        children.append(pid)
    serve(args.port)


if __name__ == "__main__":
    main()
