"""What the static middleware caches per file version: never stale; siblings within ~1 s."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from socketify import static_files
from socketify.middleware import file_versions
from socketify.middleware.file_versions import FileVersions
from socketify.testing import TestClient

from .conftest import MakeClient


@pytest.fixture
def client(static_root: Path, make_client: MakeClient) -> TestClient:
    return make_client(static_files.serve(static_root))


def etag_of(path: Path) -> str:
    info = path.stat()
    return f'"{info.st_size:x}-{info.st_mtime_ns:x}"'


def test_a_file_rewritten_in_place_gets_new_headers_at_once(
    client: TestClient, static_root: Path
) -> None:
    path = static_root / "hello.txt"
    first = client.get("/hello.txt")
    path.write_bytes(b"a longer body than before\n")
    os.utime(path, ns=(10**18, 10**18))  # a distinct mtime, whatever the clock
    second = client.get("/hello.txt")
    assert second.body == b"a longer body than before\n"
    assert second.headers["ETag"] == etag_of(path) != first.headers["ETag"]
    assert second.headers["Last-Modified"] == "Sun, 09 Sep 2001 01:46:40 GMT"
    assert second.headers["Content-Length"] == str(len(second.body))


def test_a_file_replaced_by_rename_with_the_same_size_and_mtime_is_a_new_version(
    client: TestClient, static_root: Path
) -> None:
    path = static_root / "hello.txt"
    client.get("/hello.txt")
    info = path.stat()
    replacement = static_root / "hello.new"
    replacement.write_bytes(b"X" * info.st_size)
    os.utime(replacement, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(replacement, path)  # new inode: same validators, different bytes
    assert client.get("/hello.txt").body == b"X" * info.st_size


def test_a_deleted_file_is_a_miss_not_a_cached_answer(
    client: TestClient, static_root: Path
) -> None:
    assert client.get("/style.css").status == 200
    (static_root / "style.css").unlink()
    assert client.get("/style.css").status == 404


def test_a_sibling_created_later_is_offered_within_the_ttl(
    client: TestClient, static_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    accept = {"Accept-Encoding": "gzip"}
    first = client.get("/style.css", headers=accept)
    assert "Content-Encoding" not in first.headers and "Vary" not in first.headers
    (static_root / "style.css.gz").write_bytes(gzip.compress(b"body { color: red }\n"))
    monkeypatch.setattr(file_versions, "SIBLINGS_TTL", 0.0)  # as if a second went by
    second = client.get("/style.css", headers=accept)
    assert second.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(second.body) == b"body { color: red }\n"


def test_a_removed_sibling_falls_back_to_the_plain_file(
    client: TestClient, static_root: Path
) -> None:
    accept = {"Accept-Encoding": "gzip"}
    assert client.get("/app.js", headers=accept).headers["Content-Encoding"] == "gzip"
    (static_root / "app.js.gz").unlink()
    r = client.get("/app.js", headers=accept)  # the cache still lists .gz: stat-ed afresh
    assert r.status == 200 and "Content-Encoding" not in r.headers
    assert r.body.startswith(b"console.log")


def test_vary_is_sent_when_a_sibling_exists_even_without_accept_encoding(
    client: TestClient,
) -> None:
    r = client.get("/app.js")
    assert r.headers["Vary"] == "Accept-Encoding" and "Content-Encoding" not in r.headers


def test_the_cache_is_bounded(static_root: Path) -> None:
    versions = FileVersions(limit=2)
    for name in ("hello.txt", "style.css", "app.js"):
        path = str(static_root / name)
        assert versions.get(path, os.lstat(path)).path == path
    assert len(versions) == 2


def test_the_same_version_is_reused_and_a_new_identity_replaces_it(static_root: Path) -> None:
    versions = FileVersions()
    path = str(static_root / "hello.txt")
    first = versions.get(path, os.lstat(path))
    assert versions.get(path, os.lstat(path)) is first
    os.utime(path, ns=(5, 5))
    second = versions.get(path, os.lstat(path))
    assert second is not first and second.mtime == 0 and second.etag.endswith('-5"')
