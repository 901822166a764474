"""Serving WSGI (PEP 3333) applications — Flask, Django, any `app(environ, start_response)`.

    server.mount("/legacy", flask_app)      # under a prefix of a Socketify app
    socketify run myproject.wsgi:application   # or the whole server (detected, or --wsgi)

`WsgiHandler` is the route handler behind both; `FileWrapper` is the `wsgi.file_wrapper`
that lets an app's files go out with sendfile.
"""

from socketify.wsgi.file_wrapper import FileWrapper
from socketify.wsgi.handler import WsgiApp, WsgiHandler, looks_like_wsgi

__all__ = ["FileWrapper", "WsgiApp", "WsgiHandler", "looks_like_wsgi"]
