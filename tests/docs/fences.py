"""The fenced code blocks of the documentation's Markdown pages, as the tests read them.

A block opens with a line of three or more backticks followed by its language and, in the
Material theme's syntax, optional attributes such as `title="app.py"`; it may be indented
(inside an admonition or a list), and its text is dedented by the opening fence's indent.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DOCS", "Block", "blocks_of", "command_lines", "pages"]

DOCS = Path(__file__).resolve().parents[2] / "docs"

OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`]*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its `title=` (a file name, or ""), text and line."""

    language: str
    title: str
    text: str
    line: int  # 1-based line of the opening fence: the text starts on the next one


def pages() -> list[Path]:
    """Every Markdown page under docs/, pages added later included."""
    return sorted(DOCS.rglob("*.md"))


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of `page`, in order."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = OPENING.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body: list[str] = []
        opened_at = index + 1
        index += 1
        while index < len(lines) and lines[index].strip() != fence:
            line = lines[index]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            index += 1
        language = info.split(maxsplit=1)[0] if info else ""
        title = TITLE.search(info)
        found.append(
            Block(language, title["title"] if title else "", "\n".join(body) + "\n", opened_at)
        )
        index += 1
    return found


def command_lines(block: Block) -> list[list[str]]:
    """The commands of a shell block: `$ ` prompts when it has any, else every line;
    continuation backslashes joined, comments dropped, each split as the shell would."""
    text = block.text.replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if any(line.startswith("$ ") for line in lines):
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    return [shlex.split(line, comments=True) for line in lines if not line.startswith("#")]
