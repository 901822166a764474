"""Fixtures for the middleware tests: a static tree on disk and a TestClient factory."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from socketify import Request, Response, Server
from socketify.testing import TestClient

STATIC_FILES = {
    "index.html": b"<!doctype html><title>home</title>\n",
    "hello.txt": b"Hello, static world!\n",
    "app.js": b"console.log('hi');\n" * 40,
    "style.css": b"body { color: red }\n",
    "data.bin": bytes(range(256)) * 4,
    "empty.txt": b"",
    "docs/index.html": b"<h1>docs</h1>\n",
    "docs/guide.txt": b"guide\n",
    "nodex/a.txt": b"a\n",
    "nodex/B.txt": b"b\n",
    "nodex/sub/c.txt": b"c\n",
    "nodex/<odd>&name.txt": b"odd\n",
    "nodex/.hidden": b"secret\n",
    ".env": b"SECRET=1\n",
    "assets/logo.svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>\n",
}


@pytest.fixture
def static_root(tmp_path: Path) -> Path:
    """A small site: files, nested dirs, hidden files, a symlink out, .gz/.br siblings."""
    root = tmp_path / "site"
    for name, data in STATIC_FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "app.js.gz").write_bytes(gzip.compress(STATIC_FILES["app.js"]))
    (root / "app.js.br").write_bytes(b"pretend-brotli")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside the root\n")
    os.symlink(outside, root / "escape.txt")
    os.symlink(root / "hello.txt", root / "inside-link.txt")
    os.symlink(tmp_path, root / "escape-dir")
    return root


MakeClient = Callable[..., TestClient]


@pytest.fixture
def make_client() -> MakeClient:
    """Build a TestClient for a fresh Server with the given middleware (and routes)."""

    def make(*middleware: object, routes: bool = True, **options: object) -> TestClient:
        server = Server(**options)
        for mw in middleware:
            server.use(mw)  # type: ignore[arg-type]
        if routes:

            @server.get("/api/hello")
            def hello(req: Request, res: Response) -> None:
                res.json({"hello": "world"})

            @server.post("/api/echo")
            def echo(req: Request, res: Response) -> None:
                res.send(req.body)

        return TestClient(server)

    return make
