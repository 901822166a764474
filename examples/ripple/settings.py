"""Ripple's settings: command-line flags over the environment over `.env`, over defaults.

Every flag has a `RIPPLE_*` variable of the same name (`--cert` is `RIPPLE_CERT`), read
through `socketify.config.Config.load()`, so a `.env` file in the working directory can hold
them. The launcher (`python -m examples.ripple`) puts what it settled on into the environment
of the server it starts, where every worker reads it again with `from_environment()`.

Guide: docs/guide/deployment.md.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from socketify.config import Config

__all__ = [
    "Settings",
    "SettingsError",
    "database_url",
    "from_environment",
    "parse_args",
    "uploads_folder",
]

DEFAULTS = {
    "RIPPLE_CERT": "ripple.crt",  # what `python -m examples.ripple.devcert` writes
    "RIPPLE_KEY": "ripple.key",
    "RIPPLE_HOST": "127.0.0.1",
    "RIPPLE_PORT": "8443",
    "RIPPLE_LOG": "info",
    "RIPPLE_DB": "sqlite:///ripple.db",
    "RIPPLE_UPLOADS": "ripple-uploads",
    "RIPPLE_WORKERS": "2",
}
FLAGS = {  # flag -> (variable, help)
    "cert": ("RIPPLE_CERT", "certificate chain (PEM); Ripple serves HTTPS and WSS only"),
    "key": ("RIPPLE_KEY", "private key of the certificate (PEM)"),
    "host": ("RIPPLE_HOST", "address to listen on"),
    "port": ("RIPPLE_PORT", "port to listen on"),
    "log": ("RIPPLE_LOG", "log level: debug, info, warning or error"),
    "db": ("RIPPLE_DB", "database URL (sqlite:///file.db, postgres://..., mysql://...)"),
    "secret": ("RIPPLE_SECRET", "key that signs session cookies (default: derived from --key)"),
    "uploads": ("RIPPLE_UPLOADS", "folder for uploaded files"),
    "workers": ("RIPPLE_WORKERS", "worker processes"),
}


class SettingsError(ValueError):
    """A setting is missing or unusable; the message says which and how to fix it."""


@dataclass(frozen=True)
class Settings:
    """Everything Ripple needs to start."""

    cert: str
    key: str
    host: str
    port: int
    log: str
    db: str
    secret: str
    uploads: str
    workers: int

    def environment(self) -> dict[str, str]:
        """The `RIPPLE_*` variables that give these settings back in another process."""
        return {variable: str(getattr(self, flag)) for flag, (variable, _) in FLAGS.items()}


def _settle(values: Mapping[str, str | None]) -> Settings:
    """Check the raw values; fill the session secret in from the key when none is given."""
    cert = values.get("RIPPLE_CERT") or DEFAULTS["RIPPLE_CERT"]
    key = values.get("RIPPLE_KEY") or DEFAULTS["RIPPLE_KEY"]
    for flag, path in (("--cert", cert), ("--key", key)):
        if not Path(path).is_file():
            raise SettingsError(
                f"Ripple serves HTTPS only and {flag} {path} is no file: give --cert and "
                "--key (or RIPPLE_CERT and RIPPLE_KEY); `python -m examples.ripple.devcert` "
                "makes a development pair"
            )
    numbers = {}
    for name in ("RIPPLE_PORT", "RIPPLE_WORKERS"):
        raw = values.get(name) or DEFAULTS[name]
        if not raw.isdigit():
            raise SettingsError(f"{name} must be a whole number, not {raw!r}")
        numbers[name] = int(raw)
    secret = values.get("RIPPLE_SECRET") or ""
    if not secret:
        # The key is as secret as a session key must be, and every worker reads the same file,
        # so cookies signed by one worker verify on the others and across restarts.
        secret = hashlib.sha256(b"ripple sessions\0" + Path(key).read_bytes()).hexdigest()
    return Settings(
        cert=cert,
        key=key,
        host=values.get("RIPPLE_HOST") or DEFAULTS["RIPPLE_HOST"],
        port=numbers["RIPPLE_PORT"],
        log=values.get("RIPPLE_LOG") or DEFAULTS["RIPPLE_LOG"],
        db=values.get("RIPPLE_DB") or DEFAULTS["RIPPLE_DB"],
        secret=secret,
        uploads=values.get("RIPPLE_UPLOADS") or DEFAULTS["RIPPLE_UPLOADS"],
        workers=numbers["RIPPLE_WORKERS"],
    )


def database_url(config: Config | None = None) -> str:
    """The database URL alone: what the data layer needs, with or without a certificate."""
    config = config if config is not None else Config.load()
    return config.get("RIPPLE_DB") or DEFAULTS["RIPPLE_DB"]


def uploads_folder(config: Config | None = None) -> Path:
    """The folder that keeps uploaded files."""
    config = config if config is not None else Config.load()
    return Path(config.get("RIPPLE_UPLOADS") or DEFAULTS["RIPPLE_UPLOADS"])


def from_environment(config: Config | None = None) -> Settings:
    """The settings of the environment and `.env` (what a worker of the server sees)."""
    config = config if config is not None else Config.load()
    return _settle({variable: config.get(variable) for variable, _ in FLAGS.values()})


def parse_args(argv: Sequence[str], config: Config | None = None) -> Settings:
    """The launcher's settings: each flag given wins over its variable."""
    config = config if config is not None else Config.load()
    parser = argparse.ArgumentParser(
        prog="python -m examples.ripple",
        description="Ripple, a messenger over HTTPS and WSS. Every flag may also be given "
        "as its RIPPLE_* variable, in the environment or in .env.",
    )
    for flag, (variable, text) in FLAGS.items():
        default = config.get(variable) or DEFAULTS.get(variable)
        parser.add_argument(f"--{flag}", default=default, help=f"{text} [{variable}]")
    options = parser.parse_args(list(argv))
    return _settle({variable: getattr(options, flag) for flag, (variable, _) in FLAGS.items()})
