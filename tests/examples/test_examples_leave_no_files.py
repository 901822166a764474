"""Running an example leaves the checkout as it was: what examples write goes to the ignored
`examples/.data/`, never into the repository root or the working directory."""

from __future__ import annotations

import re
import subprocess

import pytest
import requests

from tests.support.serve import REPO, Launcher

pytestmark = pytest.mark.timeout(120)

RUN = re.compile(r"`socketify run (examples\.[\w.]+:\w+)[^`]*`")
# These need a certificate made first (see their docs) or speak raw TCP, not HTTP.
NOT_HERE = ("https_hello", "tcp_echo", "tcp_chat")


def _examples() -> list[str]:
    apps = dict.fromkeys(RUN.findall((REPO / "examples" / "README.md").read_text()))
    apps["examples.orm_demo:server"] = None  # README starts it with `python -m` on a fixed port
    return [app for app in apps if not any(name in app for name in NOT_HERE)]


def _untracked_and_changed() -> set[str]:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(status.stdout.splitlines())


def test_every_example_started_from_the_repository_root_writes_nothing_outside_its_data_folder(
    serve: Launcher,
) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout (a copy of the tracked files, as the compiled suite's)")
    apps = _examples()
    assert len(apps) >= 12
    before = _untracked_and_changed()
    for app in apps:
        # Their own defaults: no database or upload folder set from outside.
        server = serve(app, args=["--preload"] if "orm_demo" in app else [])
        requests.get(server.url + "/", timeout=10)
        server.stop()
    assert _untracked_and_changed() == before
