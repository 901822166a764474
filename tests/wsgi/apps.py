"""WSGI apps the live tests serve with `socketify run`: a Flask app, and a bare app wrapped
in `wsgiref.validate.validator` (which asserts, as it runs, that we keep PEP 3333).

`WSGI_TEST_DIR` (set by the tests) holds the file `send_file` serves and the markers that
the body iterables' `close()` leaves behind.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.validate import validator

from flask import Flask, abort, jsonify, request, send_file, session, stream_with_context

DIR = Path(os.environ.get("WSGI_TEST_DIR", "/nonexistent"))

app = Flask(__name__)
app.secret_key = "tests-only"


@app.get("/ping")
def ping() -> Any:
    return {"ok": True}


@app.get("/where")
def where() -> Any:
    return {
        "script_root": request.script_root,
        "path": request.path,
        "url": request.url,
        "remote_addr": request.remote_addr,
        "scheme": request.scheme,
    }


@app.get("/stream")
def stream() -> Any:
    count = int(request.args.get("count", "3"))

    @stream_with_context
    def generate() -> Iterator[str]:
        # The request context is still there while the body streams.
        for n in range(count):
            yield f"{request.args.get('word', 'tick')} {n}\n"
            time.sleep(0.01)

    return app.response_class(generate(), mimetype="text/plain")


@app.post("/session/<value>")
def remember(value: str) -> Any:
    session["value"] = value
    return {"stored": value}


@app.get("/session")
def recall() -> Any:
    return {"value": session.get("value")}


@app.get("/download")
def download() -> Any:
    return send_file(DIR / "report.bin", as_attachment=True, download_name="report.bin")


@app.get("/teapot")
def teapot() -> Any:
    abort(418)


@app.get("/boom")
def boom() -> Any:
    raise LookupError("nothing here")


@app.errorhandler(418)
def short_and_stout(error: Any) -> Any:
    return jsonify(error="teapot"), 418


@app.errorhandler(LookupError)
def lookup_failed(error: Exception) -> Any:
    return jsonify(error=str(error)), 404


@app.post("/upload")
def upload() -> Any:
    digest = hashlib.sha256()
    size = 0
    while chunk := request.stream.read(65536):
        digest.update(chunk)
        size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


@app.post("/files")
def files() -> Any:
    upload = request.files["file"]
    data = upload.read()
    return {"name": upload.filename, "size": len(data), "field": request.form.get("note")}


class Endless:
    """A body that never ends; its close() leaves a marker file."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield b"x" * 4096
            time.sleep(0.005)

    def close(self) -> None:
        (DIR / f"closed-{self.name}").write_text("closed")


def endless(environ: dict[str, Any], start_response: Any) -> Endless:
    """A raw WSGI app: /<name> streams forever until the client leaves."""
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return Endless(environ["PATH_INFO"].strip("/") or "root")


def _checked_app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
    # PEP 3333 as first written: read() takes a size (the validator insists); the input
    # ends with the body, chunked or not, so reading to b"" is safe.
    body = b"".join(iter(lambda: environ["wsgi.input"].read(4096), b""))
    lines = [f"{key}={environ[key]}" for key in ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO")]
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(("\n".join(lines) + "\n").encode())
    yield b"body=" + body


# wsgiref's validator sits between us and the app, asserting PEP 3333 on both sides.
validated = validator(_checked_app)
