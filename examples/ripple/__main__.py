"""`python -m examples.ripple`: check the settings, then serve Ripple with `socketify run`.

    python -m examples.ripple.devcert                # ripple.crt and ripple.key, here
    python -m examples.ripple --port 8443 --workers 2

The settings (`examples.ripple.settings`) are checked here, so a missing certificate is one
clear line and exit status 2 before anything starts; then they go into the environment the
workers inherit, and the real command line takes over: a master and `--workers` workers on
`--host:--port`, HTTPS with HTTP/2 by ALPN, WSS on `/pulse`.

Guide: docs/guide/https.md, docs/guide/deployment.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from examples.ripple.settings import SettingsError, parse_args
from socketify import cli

APP = "examples.ripple.app:server"


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server; the exit status of `socketify run` (2 for unusable settings)."""
    try:
        settings = parse_args(sys.argv[1:] if argv is None else argv)
    except SettingsError as exc:
        print(f"ripple: {exc}", file=sys.stderr)
        return 2
    os.environ.update(settings.environment())
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    bind = f"{host}:{settings.port}"
    args = ["run", APP, "--bind", bind, "--workers", str(settings.workers)]
    return cli.main([*args, "--log-level", settings.log])


if __name__ == "__main__":
    sys.exit(main())
