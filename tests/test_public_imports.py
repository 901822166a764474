"""The public import paths, and the `socketify.logging` name clash with the standard library."""

from __future__ import annotations

import subprocess
import sys


def test_top_level_modules_import_from_socketify() -> None:
    from socketify import cors, logging, ratelimit, static_files
    from socketify.middleware import CompressionOptions, body_limit, request_id

    assert callable(cors.middleware) and callable(ratelimit.middleware)
    assert callable(logging.middleware) and callable(static_files.serve)
    assert callable(static_files.spa) and callable(request_id) and callable(body_limit)
    assert CompressionOptions().min_size == 256


def test_server_option_types_import_beside_server() -> None:
    import socketify
    from socketify import CompressionOptions, Server, TlsOptions
    from socketify.core.tls_options import TlsOptions as FromTls
    from socketify.middleware import CompressionOptions as FromMiddleware

    assert CompressionOptions is FromMiddleware and TlsOptions is FromTls
    assert {"CompressionOptions", "TlsOptions", "Server"} <= set(socketify.__all__)
    server = Server(compression=CompressionOptions(min_size=1024, level=1))
    assert server.settings.compression.min_size == 1024


def test_socketify_logging_does_not_shadow_the_stdlib() -> None:
    # A fresh interpreter: import order matters, so nothing may be cached from this one.
    code = (
        "from socketify import logging as ours\n"
        "import socketify.core.dispatch, socketify.middleware.access_log as a\n"
        "import logging, sys\n"
        "assert sys.modules['logging'] is logging and hasattr(logging, 'getLogger')\n"
        "assert socketify.core.dispatch.logging is logging and a.logging is logging\n"
        "assert ours is not logging and ours is a and ours.middleware\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_importing_socketify_does_not_import_gevent_or_multipart() -> None:
    code = (
        "import sys, socketify\n"
        "from socketify import cors, logging, ratelimit, sessions, static_files\n"
        "print(sorted(m for m in ('gevent', 'python_multipart') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
