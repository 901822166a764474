"""Check an implementation's answers the way TechEmpower's verifier does, before any timing.

    problems = verify(Target("ours", "http://127.0.0.1:8080"), TEST_TYPES)   # [] when it passes

Per test type: the required headers (`Server`, a `Date` in HTTP format that is not cached,
`Content-Type` of the type's kind, and `Content-Length` or `Transfer-Encoding`); the body's
shape (`{"message": "Hello, World!"}`, `Hello, World!`, `{"id", "randomNumber"}` objects in
1-10,000); the `queries` parameter clamped to 1-500, with a missing or non-numeric one read as
1; the rows answered being the database's rows; the fortunes all there, with the extra one,
sorted by message and escaped (the `<script>` row arrives as text); and updates persisted:
after `updates?queries=500` every row the answer names holds the number it says, and nearly
all of them changed. It reads the database directly (`schema.worlds`), so it expects no other
client to write while it runs.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from load_tests.tfb import schema
from load_tests.tfb.spec import ADDITIONAL_FORTUNE, FORTUNES, MAX_QUERIES, MESSAGE

__all__ = ["DATABASE_TESTS", "PATHS", "TEST_TYPES", "Target", "verify"]

TEST_TYPES = ("json", "plaintext", "db", "queries", "fortunes", "updates")
DATABASE_TESTS = ("db", "queries", "fortunes", "updates")
# Each test type's path; `queries` and `updates` end with the parameter's name.
PATHS = {
    "json": "/json",
    "plaintext": "/plaintext",
    "db": "/db",
    "queries": "/queries?queries=",
    "fortunes": "/fortunes",
    "updates": "/updates?queries=",
}
CONTENT_TYPES = {
    "json": re.compile(r"^application/json(; ?charset=(UTF|utf)-8)?$"),
    "html": re.compile(r"^text/html; ?charset=(UTF|utf)-8$"),
    "plaintext": re.compile(r"^text/plain(; ?charset=(UTF|utf)-8)?$"),
}
# (value of `queries`, how many rows the answer must have)
QUERY_CASES = (("2", 2), ("0", 1), ("foo", 1), ("501", MAX_QUERIES), ("", 1), (None, 1))


@dataclass(frozen=True)
class Target:
    """An implementation: its base URL and the prefix of its paths (`/raw` for ours raw)."""

    name: str
    base_url: str
    prefix: str = ""

    def url(self, test: str, queries: str | None = "") -> str:
        """The path of one test type; `queries=None` leaves the parameter out."""
        path = PATHS[test]
        if path.endswith("="):
            path = path.partition("?")[0] if queries is None else path + queries
        return self.prefix + path


@dataclass(frozen=True)
class Answer:
    """One response: status, headers by lower-case name (all values), body."""

    status: int
    headers: dict[str, list[str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The single value of a header, None when absent."""
        values = self.headers.get(name.lower())
        return values[0] if values else None


class NotAnswered(Exception):
    """A request got another status than 200: nothing else of that test is worth checking."""


def fetch(target: Target, path: str) -> Answer:
    """GET `path` on a new connection; `NotAnswered` unless the status is 200."""
    parts = urlsplit(target.base_url)
    con = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        con.request("GET", path, headers={"Accept": "*/*"})
        response = con.getresponse()
        body = response.read()
        headers: dict[str, list[str]] = {}
        for name, value in response.getheaders():
            headers.setdefault(name.lower(), []).append(value)
        if response.status != 200:
            raise NotAnswered(f"{path}: status {response.status}, body {body[:80]!r}")
        return Answer(response.status, headers, body)
    finally:
        con.close()


def verify(target: Target, tests: tuple[str, ...] = TEST_TYPES, *, date: bool = True) -> list[str]:
    """Every problem found in `target`'s answers to `tests`; `date` also checks, with a
    second request a second later, that `Date` is not a cached value."""
    problems: list[str] = []
    for test in tests:
        check = _CHECKS[test]
        try:
            found = check(target)
        except NotAnswered as exc:
            found = [str(exc)]
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as exc:
            found = [f"{target.url(test)}: {type(exc).__name__}: {exc}"]
        problems.extend(f"{target.name} {test}: {problem}" for problem in found)
    if date and tests:
        problems.extend(f"{target.name}: {p}" for p in _date_changes(target, tests[0]))
    return problems


def _headers(answer: Answer, kind: str, path: str) -> list[str]:
    problems = []
    for name in ("Server", "Date", "Content-Type"):
        if answer.header(name) is None:
            problems.append(f"{path}: no {name} header")
    if answer.header("Content-Length") is None and answer.header("Transfer-Encoding") is None:
        problems.append(f"{path}: neither Content-Length nor Transfer-Encoding")
    date = answer.header("Date")
    if date is not None:
        try:
            parsedate_to_datetime(date)
        except (TypeError, ValueError):
            problems.append(f"{path}: Date {date!r} is not an HTTP date")
    content_type = answer.header("Content-Type") or ""
    if content_type and not CONTENT_TYPES[kind].match(content_type):
        problems.append(f"{path}: Content-Type {content_type!r} is not {kind}")
    return problems


def _date_changes(target: Target, test: str) -> list[str]:
    path = target.url(test)
    first = fetch(target, path).header("Date")
    time.sleep(1.1)
    second = fetch(target, path).header("Date")
    return [f"{path}: Date {first!r} did not change a second later"] if first == second else []


def _check_json(target: Target) -> list[str]:
    path = target.url("json")
    answer = fetch(target, path)
    problems = _headers(answer, "json", path)
    if json.loads(answer.body) != {"message": MESSAGE}:
        problems.append(f"{path}: body {answer.body[:80]!r}")
    return problems


def _check_plaintext(target: Target) -> list[str]:
    path = target.url("plaintext")
    answer = fetch(target, path)
    problems = _headers(answer, "plaintext", path)
    if answer.body != MESSAGE.encode():
        problems.append(f"{path}: body {answer.body[:80]!r}")
    return problems


def _world_problems(item: Any, path: str, known: dict[int, int] | None) -> list[str]:
    if type(item) is not dict or set(item) != {"id", "randomNumber"}:
        return [f"{path}: {str(item)[:60]} is not an object with id and randomNumber"]
    world_id, number = item["id"], item["randomNumber"]
    if type(world_id) is not int or type(number) is not int:
        return [f"{path}: {item} holds a non-integer"]
    if not 1 <= world_id <= 10_000 or not 1 <= number <= 10_000:
        return [f"{path}: {item} is out of 1-10,000"]
    if known is not None and known.get(world_id) != number:
        return [f"{path}: {item} is not the database's row ({known.get(world_id)})"]
    return []


def _check_db(target: Target) -> list[str]:
    known = schema.worlds()
    path = target.url("db")
    answer = fetch(target, path)
    problems = _headers(answer, "json", path)
    return problems + _world_problems(json.loads(answer.body), path, known)


def _world_list(target: Target, test: str, known: dict[int, int] | None) -> list[str]:
    problems: list[str] = []
    for queries, expected in QUERY_CASES:
        path = target.url(test, queries)
        answer = fetch(target, path)
        problems += _headers(answer, "json", path)
        items = json.loads(answer.body)
        if type(items) is not list:
            problems.append(f"{path}: the answer is not an array")
            continue
        if len(items) != expected:
            problems.append(f"{path}: {len(items)} rows, not {expected}")
        for item in items:
            if found := _world_problems(item, path, known):
                problems += found
                break
    return problems


def _check_queries(target: Target) -> list[str]:
    return _world_list(target, "queries", schema.worlds())


def _check_updates(target: Target) -> list[str]:
    problems = _world_list(target, "updates", None)
    before = schema.worlds()
    path = target.url("updates", str(MAX_QUERIES))
    answer = json.loads(fetch(target, path).body)
    after = schema.worlds()
    stale = [item for item in answer if after.get(item["id"]) != item["randomNumber"]]
    if stale:
        problems.append(f"{path}: {len(stale)} answered rows not persisted, e.g. {stale[0]}")
    changed = sum(1 for item in answer if before.get(item["id"]) != after.get(item["id"]))
    if changed < 0.9 * len(answer):
        problems.append(f"{path}: only {changed} of {len(answer)} rows changed")
    return problems


class _FortuneRows(HTMLParser):
    """The text of each `<td>` per `<tr>`, and whether any element other than the page's
    own appeared (an unescaped `<script>`)."""

    PAGE = frozenset({"html", "head", "title", "body", "table", "tr", "th", "td"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.foreign: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in self.PAGE:
            self.foreign.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _check_fortunes(target: Target) -> list[str]:
    path = target.url("fortunes")
    answer = fetch(target, path)
    problems = _headers(answer, "html", path)
    text = answer.body.decode("utf-8")
    if not text.lower().startswith("<!doctype html>"):
        problems.append(f"{path}: the page does not start with <!DOCTYPE html>")
    parser = _FortuneRows()
    parser.feed(text)
    if parser.foreign:
        problems.append(f"{path}: unescaped markup {parser.foreign} (the <script> row?)")
    expected = sorted([*FORTUNES, (0, ADDITIONAL_FORTUNE)], key=lambda row: row[1])
    found = [tuple(row) for row in parser.rows if row]
    if found != [(str(i), message) for i, message in expected]:
        problems.append(f"{path}: rows differ from the fortunes sorted by message: {found[:3]}")
    return problems


_CHECKS = {
    "json": _check_json,
    "plaintext": _check_plaintext,
    "db": _check_db,
    "queries": _check_queries,
    "fortunes": _check_fortunes,
    "updates": _check_updates,
}
