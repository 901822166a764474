"""Every code sample of the documentation runs, so the pages cannot drift from the code.

The conventions, which a reader of the pages does not need to know:

- Every ```python block of a page runs, in page order, in one namespace per page (a later
  sample uses what an earlier one defined), as a module that is not `__main__`: code under
  `if __name__ == "__main__":` (which would start a server) is skipped. The requests a page
  shows are `TestClient` calls with their asserts, so running the page checks its answers.
- A function whose name starts with `test_` that a page defines (a test it shows) is called
  once the page's samples have run; a `title="test_x.py"` block is a test module, imported
  and its tests run the same way (with the `live_server` fixture when they ask for it).
- A block with `title="path"` is a file of the example: it is written under a fresh working
  folder (on the import path) before the page's samples run, so `templates/page.html` or
  `app.py` exist for the code that reads or imports them.
- Every `socketify ...` command of a ```console or ```sh block names only options that the
  command's own `--help` lists.

Pages are found by globbing docs/, so a page added later is covered without a change here.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from socketify.testing.client import live_server_fixture
from tests.docs.fences import DOCS, Block, blocks_of, command_lines, pages
from tests.support.serve import SOCKETIFY, server_environment
from tests.support.services import require_service

pytestmark = pytest.mark.timeout(60)

SHELL_LANGUAGES = ("console", "sh", "shell", "bash")
OPTION = re.compile(r"^--[a-z][a-z0-9-]*")
# Guide pages must each show working code; the reference is generated from docstrings.
GUIDES = ("getting-started.md", "guide/")
# The pytest fixtures a test on a page may ask for, by name.
FIXTURES: dict[str, Callable[[], Iterator[Any]]] = {"live_server": live_server_fixture}
# A page whose samples name one of these needs that service running (CI starts them).
SERVICES = {"redis://127.0.0.1:6379": ("Redis", "127.0.0.1", 6379)}


def page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def python_blocks(page: Path) -> list[Block]:
    return [block for block in blocks_of(page) if block.language in ("python", "py")]


@pytest.mark.parametrize("page", [page for page in pages() if python_blocks(page)], ids=page_id)
def test_the_python_samples_of_the_page_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = blocks_of(page)
    for marker, (service, host, port) in SERVICES.items():
        if any(marker in block.text for block in python_blocks(page)):
            require_service(service, host, port)
    for block in blocks:
        if block.title:
            path = tmp_path / block.title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, object] = {"__name__": "docs_sample"}
    try:
        for block in python_blocks(page):
            if is_test_file(block):
                continue  # a module of its own, run below as pytest would
            # Blank lines in front, so a traceback names the sample's line in the page.
            code = compile("\n" * block.line + block.text, str(page), "exec")
            exec(code, namespace)
        run_tests(namespace)
        for block in python_blocks(page):
            if is_test_file(block):
                module = importlib.import_module(Path(block.title).stem)
                run_tests(vars(module))
    finally:
        forget_modules_under(tmp_path)


def run_tests(namespace: dict[str, Any]) -> None:
    """Call the `test_*` functions of `namespace` as pytest would, with the fixtures a page
    may use (`live_server`, the plugin socketify installs)."""
    for name, value in list(namespace.items()):
        if not (name.startswith("test_") and inspect.isfunction(value)):
            continue
        arguments: dict[str, Any] = {}
        teardowns = []
        for parameter in inspect.signature(value).parameters:
            fixture = FIXTURES[parameter]()  # a KeyError names a fixture this harness lacks
            arguments[parameter] = next(fixture)
            teardowns.append(fixture)
        try:
            value(**arguments)
        finally:
            for fixture in reversed(teardowns):
                next(fixture, None)


def is_test_file(block: Block) -> bool:
    """A `title="test_x.py"` block: a test module the reader runs with pytest."""
    name = os.path.basename(block.title)
    return name.startswith("test_") and name.endswith(".py")


def forget_modules_under(folder: Path) -> None:
    """Drop the modules a page imported from its files, so another page's `app.py` is new."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).is_relative_to(folder):
            del sys.modules[name]


def test_every_guide_page_has_a_python_sample() -> None:
    guides = [page for page in pages() if page_id(page).startswith(GUIDES)]
    assert guides, "no guide pages found"
    without = [page_id(page) for page in guides if not python_blocks(page)]
    assert without == []


def help_text(*command: str) -> str:
    result = subprocess.run(
        [SOCKETIFY, *command, "--help"],
        capture_output=True,
        text=True,
        env=server_environment(),
        timeout=30,
        check=True,
    )
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """`socketify --help` and the subcommands' own, by subcommand ("" for the top level)."""
    return {
        "": help_text(),
        "systemd-unit": help_text("systemd-unit"),
        "db": help_text("db"),
    }


def socketify_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in pages():
        for block in blocks_of(page):
            if block.language not in SHELL_LANGUAGES:
                continue
            for words in command_lines(block):
                # `socketify`, `venv/bin/socketify`, maybe after `sudo` or `VAR=value`s.
                while words and (words[0] == "sudo" or "=" in words[0]):
                    words = words[1:]
                if words and os.path.basename(words[0]) == "socketify":
                    found.append((f"{page_id(page)}:{block.line}", words[1:]))
    return found


def test_the_shell_samples_use_only_options_that_socketify_lists(
    helps: dict[str, str],
) -> None:
    commands = socketify_commands()
    assert commands, "the docs show no socketify command"
    unknown = []
    for where, words in commands:
        subcommand = words[0] if words and words[0] in helps else ""
        for word in words:
            option = OPTION.match(word)
            if option and option[0] not in helps[subcommand]:
                unknown.append(f"{where}: {option[0]}")
    assert unknown == []
