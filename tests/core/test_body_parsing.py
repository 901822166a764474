"""Bodies: JSON, urlencoded and multipart forms (streamed, spilled, limited), body_limit,
downloads and cookies."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from socketify import HTTPError, Request, Response, Server
from socketify.core.body import BodyLimits, parse_header_params
from socketify.middleware import body_limit
from socketify.testing import TestClient
from tests.support.handle import build_request, handle

BOUNDARY = "----socketify-test-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def multipart(
    fields: list[tuple[str, str]] = (),  # type: ignore[assignment]
    files: list[tuple[str, str, str, bytes]] = (),  # type: ignore[assignment]
    *,
    raw_parts: list[bytes] = (),  # type: ignore[assignment]
    close: bool = True,
) -> bytes:
    """Encode a multipart/form-data body: fields, (name, filename, type, data) files."""
    out = bytearray()
    for name, value in fields:
        out += f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    for name, filename, ctype, data in files:
        out += (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: {ctype}\r\n\r\n'
        ).encode()
        out += data + b"\r\n"
    for part in raw_parts:
        out += f"--{BOUNDARY}\r\n".encode() + part + b"\r\n"
    if close:
        out += f"--{BOUNDARY}--\r\n".encode()
    return bytes(out)


def form_app(limits: BodyLimits | None = None) -> TestClient:
    server = Server()

    @server.post("/form")
    def form(req: Request, res: Response) -> None:
        fields, files = req.multipart(limits)
        res.json(
            {
                "fields": fields.multi_items(),
                "files": {
                    name: {
                        "filename": f.filename,
                        "type": f.content_type,
                        "size": f.size,
                        "data": f.read().decode("latin-1"),
                    }
                    for name, f in files.items()
                },
            }
        )

    @server.post("/json")
    def json(req: Request, res: Response) -> None:
        res.json({"got": req.json()})

    return TestClient(server)


def post_multipart(client: TestClient, body: bytes, ctype: str = MULTIPART):
    return client.post("/form", data=body, headers={"Content-Type": ctype})


# -- JSON and urlencoded --------------------------------------------------------------------


def json_app(**options: object) -> Server:
    server = Server(**options)

    @server.post("/json")
    def default(req: Request, res: Response) -> None:
        res.json({"items": len(req.json())})

    @server.post("/json/4k")
    def small(req: Request, res: Response) -> None:
        res.json({"items": len(req.json(max_size=4096))})

    @server.post("/json/8m")
    def large(req: Request, res: Response) -> None:
        res.json({"items": len(req.json(max_size=8 << 20))})

    return server


def json_array(size: int) -> bytes:
    """A JSON array of zeros about `size` bytes long."""
    return b"[" + b",".join([b"0"] * (size // 2)) + b"]"


def test_json_over_the_default_one_mib_is_413_and_under_it_parses() -> None:
    client = TestClient(json_app())
    over = client.post("/json", data=json_array(1_100_000), headers={"Content-Type": "x/y"})
    assert (over.status, over.text) == (413, "JSON body too large\n")
    assert client.post("/json", data=json_array(1_000_000)).json() == {"items": 500_000}


def test_max_json_size_is_a_server_option_and_a_per_call_argument() -> None:
    client = TestClient(json_app(max_json_size=1000))
    assert client.post("/json", data=json_array(2000)).status == 413
    assert client.post("/json", data=json_array(900)).status == 200
    assert client.post("/json/4k", data=json_array(3000)).json() == {"items": 1500}
    assert client.post("/json/4k", data=json_array(5000)).status == 413
    assert TestClient(json_app()).post("/json/8m", data=json_array(4 << 20)).status == 200


def test_json_over_the_bound_is_refused_without_parsing_it() -> None:
    text = json_array(8 << 20)
    tracemalloc.start()
    try:
        answer = TestClient(json_app()).post("/json", data=text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert answer.status == 413
    assert peak < 4 * len(text)  # parsing it would take some 16 times its size


def test_a_chunked_json_body_over_the_bound_is_413() -> None:
    client = TestClient(json_app(max_json_size=1000))
    chunks = [json_array(800), b" " * 800]
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    head = b"POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert client.exchange(head + body).startswith(b"HTTP/1.1 413 ")


def test_max_json_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_json_size"):
        Server(max_json_size=0)


def test_json_body_and_bad_json_400() -> None:
    client = form_app()
    assert client.post("/json", json={"a": [1, 2]}).json() == {"got": {"a": [1, 2]}}
    bad = client.post("/json", data=b"{nope", headers={"Content-Type": "application/json"})
    assert bad.status == 400


def test_urlencoded_form_is_a_multidict() -> None:
    client = form_app()
    r = client.post("/form", data={"a": ["1", "2"], "path": "x/y z", "e": ""})
    assert r.json()["fields"] == [["a", "1"], ["a", "2"], ["path", "x/y z"], ["e", ""]]
    req = build_request(
        "POST",
        "/",
        [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
        b"q=caf%C3%A9+au+lait&q=2&%2F=%2F",
    )
    form = req.form()
    assert form["q"] == "2" and form.getall("q") == ["café au lait", "2"] and form["/"] == "/"
    assert req.files() == {}


def test_other_content_types_give_an_empty_form() -> None:
    req = build_request("POST", "/", [("Content-Type", "text/plain")], b"a=1")
    assert dict(req.form()) == {}


def test_urlencoded_limits() -> None:
    req = build_request(
        "POST", "/", [("Content-Type", "application/x-www-form-urlencoded")], b"a=1&b=2&c=3"
    )
    with pytest.raises(HTTPError) as too_many:
        req.form(BodyLimits(max_parts=2))
    assert too_many.value.status == 413
    big = build_request(
        "POST", "/", [("Content-Type", "application/x-www-form-urlencoded")], b"a=" + b"x" * 100
    )
    with pytest.raises(HTTPError):
        big.form(BodyLimits(max_field_size=10))


# -- multipart ------------------------------------------------------------------------------


def test_multipart_fields_and_files() -> None:
    body = multipart(
        [("title", "Hello"), ("tag", "a"), ("tag", "b")],
        [("upload", "notes.txt", "text/plain", b"line1\r\nline2\r\n--not-a-boundary\r\n")],
    )
    r = post_multipart(form_app(), body).json()
    assert r["fields"] == [["title", "Hello"], ["tag", "a"], ["tag", "b"]]
    upload = r["files"]["upload"]
    assert upload["filename"] == "notes.txt" and upload["type"] == "text/plain"
    assert upload["data"] == "line1\r\nline2\r\n--not-a-boundary\r\n"  # CRLFs kept exactly
    assert upload["size"] == len(upload["data"])


def test_binary_file_round_trips_byte_for_byte() -> None:
    data = bytes(range(256)) * 64 + b"\r\n--" + BOUNDARY.encode()[:-1]
    body = multipart(files=[("f", "blob.bin", "application/octet-stream", data)])
    req = build_request("POST", "/", [("Content-Type", MULTIPART)], body)
    assert req.files()["f"].read() == data


def test_part_kinds_follow_spec() -> None:
    body = multipart(
        raw_parts=[
            b'Content-Disposition: form-data; name="typed"\r\nContent-Type: text/csv\r\n\r\na,b',
            b"Content-Disposition: form-data\r\n\r\nnameless",
            b'Content-Disposition: form-data; name="empty"; filename=""\r\n\r\n',
        ]
    )
    req = build_request("POST", "/", [("Content-Type", MULTIPART)], body)
    form, files = req.multipart()
    assert dict(form) == {}
    assert files["typed"].read() == b"a,b" and files["typed"].filename == ""
    assert files["empty"].size == 0 and files["empty"].content_type == "application/octet-stream"


UTF8_PART = 'Content-Disposition: form-data; name="c"; filename="résumé 履歴.txt"\r\n\r\nx'.encode()


def test_filenames_are_reduced_to_their_last_component_and_keep_utf8() -> None:
    body = multipart(
        raw_parts=[
            b'Content-Disposition: form-data; name="a"; filename="../../etc/passwd"\r\n\r\nx',
            b'Content-Disposition: form-data; name="b"; filename="C:\\\\Users\\\\me\\\\cv.pdf"'
            b"\r\n\r\nx",
            UTF8_PART,
            b'Content-Disposition: form-data; name="d"; filename="x"; '
            b"filename*=UTF-8''%E2%82%AC.txt\r\n\r\nx",
        ]
    )
    files = build_request("POST", "/", [("Content-Type", MULTIPART)], body).files()
    assert files["a"].filename == "passwd"
    assert files["b"].filename == "cv.pdf"
    assert files["c"].filename == "résumé 履歴.txt"
    assert files["d"].filename == "€.txt"


def test_repeated_file_fields_are_all_kept() -> None:
    body = multipart(files=[("f", "1.txt", "text/plain", b"1"), ("f", "2.txt", "text/plain", b"2")])
    files = build_request("POST", "/", [("Content-Type", MULTIPART)], body).files()
    assert files["f"].filename == "2.txt"
    assert [f.filename for f in files.getall("f")] == ["1.txt", "2.txt"]


def test_large_parts_spill_to_a_temporary_file(tmp_path: Path) -> None:
    data = b"0123456789" * 10_000
    body = multipart(files=[("f", "big.bin", "application/octet-stream", data)])
    small = build_request("POST", "/", [("Content-Type", MULTIPART)], body)
    upload = small.files(BodyLimits(spool_size=1024))["f"]
    assert not upload.in_memory and upload.size == len(data)
    upload.save(tmp_path / "copy.bin")
    assert (tmp_path / "copy.bin").read_bytes() == data
    assert upload.read(10) == b"0123456789"  # save() kept the position
    kept = build_request("POST", "/", [("Content-Type", MULTIPART)], body).files()["f"]
    assert kept.in_memory


@pytest.mark.parametrize(
    ("limits", "body", "status"),
    [
        (BodyLimits(max_parts=2), multipart([("a", "1"), ("b", "2"), ("c", "3")]), 413),
        (BodyLimits(max_field_size=4), multipart([("a", "12345")]), 413),
        (BodyLimits(max_file_size=4), multipart(files=[("f", "f", "text/plain", b"12345")]), 413),
        (None, multipart([("a", "1")], close=False), 400),
        (None, multipart([("a", "1")])[:-10], 400),
        (None, b"this is not multipart at all", 400),
        (
            BodyLimits(max_part_headers=2),
            multipart(raw_parts=[b"A: 1\r\nB: 2\r\nC: 3\r\nContent-Disposition: x\r\n\r\nv"]),
            400,
        ),
    ],
)
def test_limits_and_malformed_bodies(limits: BodyLimits | None, body: bytes, status: int) -> None:
    r = post_multipart(form_app(limits), body)
    assert r.status == status, r.body


def test_missing_boundary_is_400() -> None:
    r = post_multipart(form_app(), multipart([("a", "1")]), "multipart/form-data")
    assert r.status == 400 and b"boundary" in r.body


def test_quoted_boundary_and_params() -> None:
    body = multipart([("a", "1")])
    req = build_request(
        "POST", "/", [("Content-Type", f'multipart/form-data; boundary="{BOUNDARY}"')], body
    )
    assert req.form()["a"] == "1"
    assert parse_header_params('form-data; name="a;b"; filename="q\\"uote"') == (
        "form-data",
        {"name": "a;b", "filename": 'q"uote'},
    )


# -- streamed bodies ------------------------------------------------------------------------


def pieces(data: bytes, size: int = 65536) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def streamed_upload(size: int) -> Iterator[bytes]:
    """A multipart body of `size` payload bytes, produced piece by piece (never whole)."""
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="f"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    block = bytes(range(256)) * 256  # 64 KiB
    for _ in range(size // len(block)):
        yield block
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def test_streamed_multipart_is_parsed_in_bounded_memory() -> None:
    size = 16 * 1024 * 1024
    req = build_request("POST", "/", [("Content-Type", MULTIPART)], streamed_upload(size))
    tracemalloc.start()
    try:
        upload = req.files()["f"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert upload.size == size and not upload.in_memory
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes while parsing a {size}-byte upload"
    upload.file.seek(size - 256)
    assert upload.read() == bytes(range(256))


def test_streamed_body_reads_whole_once_and_iterates_once() -> None:
    req = build_request("POST", "/", [], pieces(b"abc" * 100_000), content_length=300_000)
    assert req.body == b"abc" * 100_000
    assert b"".join(req.iter_body()) == req.body  # bytes are kept once read
    stream_only = build_request("POST", "/", [], pieces(b"xyz" * 10))
    assert b"".join(stream_only.iter_body()) == b"xyz" * 10
    with pytest.raises(RuntimeError, match="already read"):
        stream_only.body  # noqa: B018


# -- body_limit -----------------------------------------------------------------------------


def limited_server(limit: int) -> Server:
    server = Server()
    upload = server.post("/upload", lambda req, res: res.send(f"{len(req.body)} bytes"))
    upload.use(body_limit(limit))
    server.post("/free", lambda req, res: res.send(f"{len(req.body)} bytes"))
    return server


def test_body_limit_via_test_client() -> None:
    client = TestClient(limited_server(10))
    assert client.post("/upload", data=b"x" * 10).body == b"10 bytes"
    too_big = client.post("/upload", data=b"x" * 11)
    assert too_big.status == 413 and too_big.body == b"Payload Too Large\n"
    assert client.post("/free", data=b"x" * 11).status == 200


def test_body_limit_refuses_from_content_length_before_reading() -> None:
    def never_read() -> Iterator[bytes]:
        raise AssertionError("the body was read")
        yield b""

    req = build_request(
        "POST", "/upload", [("Content-Length", "1000")], never_read(), content_length=1000
    )
    res = handle(limited_server(10), req)
    assert res.status_code == 413


def test_body_limit_stops_a_chunked_stream_at_the_limit() -> None:
    read: list[int] = []

    def endless() -> Iterator[bytes]:
        while True:
            read.append(1)
            yield b"x" * 4096

    req = build_request("POST", "/upload", [("Transfer-Encoding", "chunked")], endless())
    res = handle(limited_server(10_000), req)
    assert res.status_code == 413 and len(read) == 3


# -- downloads and cookies ------------------------------------------------------------------


def test_download_content_disposition_is_escaped_rfc6266(tmp_path: Path) -> None:
    path = tmp_path / "report.csv"
    path.write_text("a,b\n")
    server = Server()
    server.get("/plain", lambda req, res: res.send_file(path, download=True))
    server.get("/named", lambda req, res: res.send_file(path, download=True, name='Q4 "€".csv'))
    client = TestClient(server)
    assert client.get("/plain").headers["Content-Disposition"] == (
        'attachment; filename="report.csv"'
    )
    named = client.get("/named").headers["Content-Disposition"]
    assert named.startswith('attachment; filename="Q4 \\"')
    assert "filename*=UTF-8''Q4%20%22%E2%82%AC%22.csv" in named
    assert client.get("/named").body == b"a,b\n"


def test_cookies_parse_and_build_per_spec() -> None:
    server = Server()

    @server.get("/")
    def index(req: Request, res: Response) -> None:
        res.set_cookie("sid", "abc", max_age=60, secure=True, http_only=True, same_site="lax")
        res.clear_cookie("old")
        res.json(req.cookies)

    r = TestClient(server).get("/", headers={"Cookie": 'a=1; b="two"; novalue; =x; a=3'})
    assert r.json() == {"a": "3", "b": "two"}
    assert r.headers.getall("Set-Cookie") == [
        "sid=abc; Path=/; Max-Age=60; Secure; HttpOnly; SameSite=Lax",
        "old=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
    ]
