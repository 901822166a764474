"""Server-level compression: Accept-Encoding q-values are honoured (`gzip;q=0` gets no gzip),
streams are compressed chunk by chunk, and files are never compressed on the fly."""

from __future__ import annotations

import gzip
import random as random_module
import zlib
from pathlib import Path

import pytest

from socketify import Server
from socketify.middleware import CompressionOptions
from socketify.testing import TestClient

TEXT = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20


def app(compression: object = True) -> TestClient:
    server = Server(compression=compression)

    @server.get("/text")
    def text(req, res):
        res.send(TEXT)

    @server.get("/json")
    def json(req, res):
        res.json({"items": list(range(200))})

    @server.get("/small")
    def small(req, res):
        res.send("tiny")

    @server.get("/png")
    def png(req, res):
        res.send(b"\x89PNG" + b"\x00" * 1000, "image/png")

    @server.get("/svg")
    def svg(req, res):
        res.send("<svg>" + " " * 1000 + "</svg>", "image/svg+xml")

    @server.get("/random")
    def random(req, res):
        res.send(random_module.Random(1).randbytes(600), "text/plain")

    @server.get("/encoded")
    def encoded(req, res):
        res.set_header("Content-Encoding", "gzip")
        res.send(gzip.compress(TEXT.encode()), "text/plain")

    @server.get("/stream")
    def stream(req, res):
        res.set_header("Content-Type", "text/plain")
        res.stream(f"line {i}\n" * 20 for i in range(10))

    @server.get("/events")
    def events(req, res):
        res.set_header("Content-Type", "text/event-stream")
        res.stream(iter(["data: x\n\n" * 50]))

    @server.get("/partial")
    def partial(req, res):
        res.status(206).set_header("Content-Range", "bytes 0-999/5000")
        res.send(TEXT[:1000])

    @server.get("/no-transform")
    def no_transform(req, res):
        res.set_header("Cache-Control", "no-transform")
        res.send(TEXT)

    @server.get("/tagged")
    def tagged(req, res):
        res.set_header("ETag", '"v1"')
        res.send(TEXT)

    @server.get("/file")
    def file(req, res):
        res.send_file(Path(__file__))

    @server.get("/vary")
    def vary(req, res):
        res.set_header("Vary", "Origin")
        res.send(TEXT)

    return TestClient(server)


@pytest.fixture
def client() -> TestClient:
    return app()


def test_gzip_when_accepted(client: TestClient) -> None:
    r = client.get("/text", headers={"Accept-Encoding": "gzip, deflate"})
    assert r.headers["Content-Encoding"] == "gzip" and r.body[:2] == b"\x1f\x8b"
    assert gzip.decompress(r.body).decode() == TEXT
    assert r.headers["Content-Length"] == str(len(r.body))
    assert r.headers["Vary"] == "Accept-Encoding"
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"  # sniffed from the original


def test_deflate_is_zlib_wrapped(client: TestClient) -> None:
    r = client.get("/json", headers={"Accept-Encoding": "deflate"})
    assert r.headers["Content-Encoding"] == "deflate"
    assert zlib.decompress(r.body).startswith(b'{"items":[0,1,2')


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("gzip;q=0, deflate", "deflate"),
        ("gzip;q=0.2, deflate;q=0.8", "deflate"),
        ("deflate;q=0.5, gzip;q=0.5", "gzip"),
        ("*", "gzip"),
        ("*;q=0, deflate", "deflate"),
        ("x-gzip", "gzip"),
        ("GZIP", "gzip"),
        ("gzip;q=0", None),
        ("gzip;q=0, deflate;q=0", None),
        ("br", None),
        ("identity", None),
        ("gzip;q=bogus", None),
    ],
)
def test_q_values_are_honoured(client: TestClient, accept: str, expected: str | None) -> None:
    r = client.get("/text", headers={"Accept-Encoding": accept})
    assert r.headers.get("Content-Encoding") == expected
    if expected is None:
        assert r.body == TEXT.encode()
        assert r.headers["Vary"] == "Accept-Encoding"


def test_no_accept_encoding_changes_nothing(client: TestClient) -> None:
    r = client.get("/text")
    assert "Content-Encoding" not in r.headers and "Vary" not in r.headers


def test_small_bodies_and_incompressible_types_are_left_alone(client: TestClient) -> None:
    ae = {"Accept-Encoding": "gzip"}
    small = client.get("/small", headers=ae)
    assert "Content-Encoding" not in small.headers
    assert "Vary" not in small.headers  # below min_size it is never compressed: no variance
    assert "Content-Encoding" not in client.get("/png", headers=ae).headers
    assert "Vary" not in client.get("/png", headers=ae).headers
    assert client.get("/svg", headers=ae).headers["Content-Encoding"] == "gzip"


def test_a_body_that_would_grow_is_sent_as_is(client: TestClient) -> None:
    r = client.get("/random", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in r.headers


def test_never_for_pre_encoded_partial_no_transform_or_files(client: TestClient) -> None:
    ae = {"Accept-Encoding": "gzip"}
    encoded = client.get("/encoded", headers=ae)
    assert gzip.decompress(encoded.body).decode() == TEXT  # encoded once, not twice
    assert "Content-Encoding" not in client.get("/partial", headers=ae).headers
    assert "Content-Encoding" not in client.get("/no-transform", headers=ae).headers
    file = client.get("/file", headers=ae)
    assert "Content-Encoding" not in file.headers and file.body == Path(__file__).read_bytes()


def test_streams_are_compressed_chunk_by_chunk(client: TestClient) -> None:
    r = client.get("/stream", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.headers["Transfer-Encoding"] == "chunked"
    expected = "".join(f"line {i}\n" * 20 for i in range(10))
    assert gzip.decompress(r.body).decode() == expected


def test_each_streamed_chunk_is_decodable_on_arrival() -> None:
    from socketify.core.compression import _compressed_stream

    decoder = zlib.decompressobj(31)
    for produced, sent in zip(
        [b"first chunk\n", b"second\n"],
        _compressed_stream(iter([b"first chunk\n", b"second\n"]), "gzip", 6),
        strict=False,
    ):
        assert decoder.decompress(sent) == produced  # a sync flush after every chunk


def test_server_sent_events_are_never_compressed(client: TestClient) -> None:
    r = client.get("/events", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in r.headers and r.body.startswith(b"data: x")


def test_strong_etag_becomes_weak_and_vary_is_appended(client: TestClient) -> None:
    ae = {"Accept-Encoding": "gzip"}
    assert client.get("/tagged", headers=ae).headers["ETag"] == 'W/"v1"'
    assert client.get("/tagged").headers["ETag"] == '"v1"'
    assert client.get("/vary", headers=ae).headers["Vary"] == "Origin, Accept-Encoding"


def test_head_gets_the_compressed_length(client: TestClient) -> None:
    get = client.get("/text", headers={"Accept-Encoding": "gzip"})
    head = client.head("/text", headers={"Accept-Encoding": "gzip"})
    assert head.body == b"" and head.headers["Content-Length"] == get.headers["Content-Length"]
    assert head.headers["Content-Encoding"] == "gzip"


def test_error_pages_may_be_compressed_too() -> None:
    server = Server()

    @server.get("/big-error")
    def big_error(req, res):
        res.status(500).send(TEXT)

    r = TestClient(server).get("/big-error", headers={"Accept-Encoding": "gzip"})
    assert r.status == 500 and r.headers["Content-Encoding"] == "gzip"


def test_compression_off() -> None:
    r = app(False).get("/text", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in r.headers and "Vary" not in r.headers


def test_options_min_size_types_codings_and_streams() -> None:
    opts = CompressionOptions(min_size=10_000, deflate=False, streams=False)
    client = app(opts)
    plain = client.get("/text", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in plain.headers
    r = client.get("/stream", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in r.headers
    only_json = app(CompressionOptions(types=("application/json",), gzip=False))
    ae = {"Accept-Encoding": "gzip, deflate"}
    assert only_json.get("/json", headers=ae).headers["Content-Encoding"] == "deflate"
    assert "Content-Encoding" not in only_json.get("/text", headers=ae).headers
    with pytest.raises(ValueError):
        CompressionOptions(level=12)
    with pytest.raises(TypeError):
        Server(compression="yes please")
