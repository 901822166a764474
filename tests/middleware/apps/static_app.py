"""The app of the middleware real-server tests (`tests.middleware.apps.static_app:server`).

Static files from $SOCKETIFY_TEST_STATIC_ROOT under /static, CORS for one origin, compression
on, and an /upload route that hashes a multipart upload without holding it in memory.
"""

from __future__ import annotations

import hashlib
import os

from socketify import Request, Response, Server, cors, static_files
from socketify.core.body import BodyLimits

ROOT = os.environ.get("SOCKETIFY_TEST_STATIC_ROOT", os.getcwd())

server = Server(max_body_size=64 * 1024 * 1024)
server.use(cors.middleware(allow_origin="https://app.example", allow_credentials=True))
server.use(static_files.serve(ROOT, mount="/static"))


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.json({"ok": True})


@server.get("/text")
def text(req: Request, res: Response) -> None:
    res.send("compress me, please. " * 200)


@server.post("/upload")
def upload(req: Request, res: Response) -> None:
    form, files = req.multipart(BodyLimits(max_file_size=60 * 1024 * 1024))
    upload = files["file"]
    digest = hashlib.sha256()
    while chunk := upload.read(1 << 20):
        digest.update(chunk)
    res.json(
        {
            "name": form.get("name"),
            "filename": upload.filename,
            "size": upload.size,
            "sha256": digest.hexdigest(),
            "in_memory": upload.in_memory,
        }
    )
