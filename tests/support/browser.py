"""Headless Chromium driven by Playwright, for the front-end tests.

Playwright's own browser download is not used: it drives Debian's `chromium` package (`.ci/run`
installs it) through `executable_path`. Without Chromium or Playwright the tests skip, or fail
under SOCKETIFY_REQUIRE_SERVICES=1 like the other tests that need something outside Python.

    with chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        assert wait_for(page, "document.title") == "ready"
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.services import unavailable

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def chromium_or_skip() -> str:
    """The Chromium executable; skips the test (fails in CI) when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    unavailable("no Chromium on PATH (apt-get install chromium)")


@contextlib.contextmanager
def chromium(args: Sequence[str] = ()) -> Iterator[Browser]:
    """A headless Chromium with its own profile, closed on exit; `args` are more command-line
    switches (a certificate to trust, say)."""
    executable = chromium_or_skip()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox", *args]
        )
        try:
            yield browser
        finally:
            browser.close()


def wait_for(page: Page, expression: str, timeout: float = 10.0) -> Any:
    """The first truthy value of the JavaScript `expression` in `page`, polled until `timeout`
    seconds pass (an expression that throws counts as not yet true)."""
    guarded = f"() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }}"
    return page.wait_for_function(guarded, timeout=timeout * 1000).json_value()


# Set to refresh the screenshots committed under docs/ from a test run.
UPDATE_SCREENSHOTS = "SOCKETIFY_UPDATE_SCREENSHOTS"


def screenshot(page: Page, committed: Path) -> bytes:
    """A PNG screenshot of `page`; it replaces the committed file `committed` (the one the
    README shows) only when SOCKETIFY_UPDATE_SCREENSHOTS is set, so ordinary runs leave the
    working tree clean."""
    image = page.screenshot()
    assert image.startswith(b"\x89PNG"), "not a PNG"
    if os.environ.get(UPDATE_SCREENSHOTS):
        committed.parent.mkdir(parents=True, exist_ok=True)
        committed.write_bytes(image)
    return image
