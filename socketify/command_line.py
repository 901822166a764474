"""argparse as every `socketify` command uses it: one help layout, errors as exceptions.

Each command declares its options once, with their help text, on a `Parser`; its `--help` is
that parser's generated help, so the text and the options cannot drift apart.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["HelpFormatter", "Parser", "UsageError"]


class UsageError(Exception):
    """A command line we cannot act on (exit status 2); `usage` names where to read more."""

    def __init__(self, message: str, usage: str = "socketify --help") -> None:
        super().__init__(message)
        self.usage = usage


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, at the width and indent of a terminal page."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=100)


class Parser(argparse.ArgumentParser):
    """A command's parser: short messages, raised as `UsageError` naming the command's help."""

    def __init__(self, prog: str, usage: str) -> None:
        super().__init__(prog=prog, usage=usage, add_help=False, formatter_class=HelpFormatter)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            message = "unknown option: " + message.split(": ", 1)[1]
        elif message.endswith("expected one argument"):
            message = message.split(":")[0].removeprefix("argument ") + " requires an argument"
        raise UsageError(message, f"{self.prog} --help")
