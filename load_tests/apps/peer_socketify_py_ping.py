"""Peer: socketify.py (uWebSockets) answering /ping (load_tests/.venv only).

    load_tests/.venv/bin/python load_tests/apps/peer_socketify_py_ping.py --port 8080

Run as a script, never with this repository on the path: the PyPI package is also named
`socketify`. One process, one uWebSockets loop.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# This repository's `socketify` would shadow the PyPI package of the same name.
_repo = str(Path(__file__).resolve().parents[2])
sys.path[:] = [entry for entry in sys.path if entry.rstrip("/") != _repo]

from socketify import App  # noqa: E402


def ping(res, req):
    res.write_header(b"Content-Type", b"application/json")
    res.end(b'{"ok":true}')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    app = App()
    app.get("/ping", ping)
    app.listen(args.port, lambda config: None)
    app.run()


if __name__ == "__main__":
    main()
