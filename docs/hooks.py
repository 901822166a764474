"""MkDocs hooks: the Performance page is README's performance section, with its charts.

README.md is where the figures are kept (each one beside the command that measured it), so
the site renders that section rather than a copy that would drift. Its charts live in
`load_tests/results/`, outside the docs folder: the hook adds the ones the section names to
the site, under `results/`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGE = "performance.md"
MARKER = "<!-- README: Performance -->"
CHART = re.compile(r"\]\((load_tests/results/[\w.-]+\.(?:png|svg))\)")
SECTION = re.compile(r"^## Performance\n(.*?)(?=^## )", re.MULTILINE | re.DOTALL)


def performance_section() -> str:
    """README's `## Performance` section, without its heading."""
    found = SECTION.search(README.read_text())
    if found is None:
        raise ValueError("README.md has no '## Performance' section")
    return found.group(1)


def on_files(files: Files, config: Any) -> Files:
    """Add the charts the performance section shows to the site, under `results/`."""
    for chart in CHART.findall(performance_section()):
        source = REPO / chart
        files.append(
            File(
                f"results/{source.name}",
                src_dir=str(source.parent.parent),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Put README's section in place of the Performance page's marker."""
    if page.file.src_uri != PAGE:
        return markdown
    section = CHART.sub(
        lambda chart: f"](results/{Path(chart.group(1)).name})", performance_section()
    )
    return markdown.replace(MARKER, section)
