"""The documentation site as a reader sees it: served over HTTP (by `socketify --run-http`)
and rendered in headless Chromium, checked on the DOM of its key pages."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.browser import screenshot
from tests.support.ports import free_port
from tests.support.serve import Launcher

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.timeout(120)

KEY_PAGES = ("", "getting-started/", "guide/routing/", "reference/server/", "performance/")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

# Code whose text runs past its box and whose box neither scrolls nor wraps it: clipped.
CLIPPED_CODE = """() => [...document.querySelectorAll('.md-content code')].filter(code => {
    const style = getComputedStyle(code);
    const scrolls = ['auto', 'scroll'].includes(style.overflowX);
    const wraps = !['pre', 'nowrap'].includes(style.whiteSpace);
    const box = code.closest('pre') || code;
    const parentScrolls = ['auto', 'scroll'].includes(getComputedStyle(box).overflowX);
    return code.scrollWidth > code.clientWidth + 1 && !scrolls && !wraps && !parentScrolls;
}).map(code => code.textContent.slice(0, 60))"""

# Nav links of the primary sidebar that a reader can see without opening a section.
VISIBLE_NAV = """() => [...document.querySelectorAll('.md-nav--primary .md-nav__link')]
    .filter(link => link.checkVisibility({visibilityProperty: true, opacityProperty: true}))
    .map(link => link.textContent.trim())"""


@pytest.fixture
def docs_url(serve: Launcher, site: Path) -> str:
    port = free_port()
    command = ["--run-http", str(site), "--host", "127.0.0.1", "--port", str(port)]
    return serve.start(command, ("127.0.0.1", port)).url


def _open(browser: Browser, url: str) -> Page:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector(".md-content")
    return page


def test_key_pages_show_no_clipped_code_and_a_working_search_box(
    browser: Browser, docs_url: str, tmp_path: Path
) -> None:
    for path in KEY_PAGES:
        page = _open(browser, f"{docs_url}/{path}")
        assert page.evaluate(CLIPPED_CODE) == [], path
        search = page.locator("input.md-search__input")
        assert search.count() == 1 and search.is_enabled(), path
        name = path.strip("/").replace("/", "-") or "home"
        (tmp_path / f"{name}.png").write_bytes(screenshot(page, SCREENSHOTS / f"docs-{name}.png"))
        page.close()


def test_the_sidebar_shows_sections_collapsed_until_opened(browser: Browser, docs_url: str) -> None:
    page = _open(browser, docs_url + "/")
    visible = page.evaluate(VISIBLE_NAV)
    assert {"Guide", "Reference", "Internals"} <= set(visible)
    assert "Routing" not in visible and "Request" not in visible  # inside closed sections
    assert len(visible) < 15, visible
    page.locator(".md-nav--primary label.md-nav__link", has_text="Guide").first.click()
    page.wait_for_timeout(300)
    assert "Routing" in page.evaluate(VISIBLE_NAV)


def test_search_finds_a_page_when_the_site_is_served(browser: Browser, docs_url: str) -> None:
    page = _open(browser, docs_url + "/")
    page.keyboard.press("/")  # Material's shortcut: focus the search box
    page.keyboard.type("sendfile", delay=50)
    page.wait_for_selector(".md-search-result__item", timeout=20_000)
    assert page.locator(".md-search-result__item").count() > 0


def test_the_home_page_gives_the_install_command_an_example_and_links(
    browser: Browser, docs_url: str
) -> None:
    page = _open(browser, docs_url + "/")
    text = page.locator(".md-content").inner_text()
    assert "pip install ." in text and "@server.get" in text
    links = {a.get_attribute("href") for a in page.locator(".md-content a").all()}
    for target in ("getting-started/", "reference/", "performance/"):
        assert any(href and href.rstrip("/").endswith(target.rstrip("/")) for href in links), target
