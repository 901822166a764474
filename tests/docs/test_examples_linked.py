"""The guide and the examples point at each other, and neither points at nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.fences import DOCS, pages

REPO = DOCS.parent
EXAMPLE = re.compile(r"`(examples/[\w./-]+)`")
GUIDE = re.compile(r"(docs/[\w./-]+\.md)")


def guide_pages() -> list[Path]:
    return [page for page in pages() if page.parent.name == "guide"] + [DOCS / "getting-started.md"]


@pytest.mark.parametrize("page", guide_pages(), ids=lambda page: page.name)
def test_each_guide_page_names_an_example_that_exists(page: Path) -> None:
    named = EXAMPLE.findall(page.read_text())
    assert named, f"{page.name} names no example"
    missing = [path for path in named if not (REPO / path).exists()]
    assert missing == []


def test_each_example_names_the_guide_pages_that_explain_it() -> None:
    examples = [
        path
        for path in sorted((REPO / "examples").rglob("*.py"))
        if not path.name.startswith("_") and '"""' in path.read_text()[:3]
    ]
    assert examples
    for example in examples:
        docstring = example.read_text().split('"""')[1]
        guides = GUIDE.findall(docstring)
        assert guides, f"{example.relative_to(REPO)} names no guide page"
        assert [guide for guide in guides if not (REPO / guide).is_file()] == []


def test_the_charts_and_records_the_readme_cites_exist() -> None:
    readme = (REPO / "README.md").read_text()
    cited = re.findall(r"(load_tests/results/[\w.+-]+\.(?:png|svg|json))", readme)
    assert cited, "the README cites no benchmark result"
    assert [path for path in cited if not (REPO / path).is_file()] == []
