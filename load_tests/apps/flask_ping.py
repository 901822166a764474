"""Flask /ping for gunicorn: the exact bytes of ours (no jsonify, which adds a newline)."""

from __future__ import annotations

from flask import Flask, Response

BODY = b'{"ok":true}'

app = Flask(__name__)


@app.get("/ping")
def ping() -> Response:
    """Answer {"ok":true} as application/json."""
    return Response(BODY, content_type="application/json")
