"""HTTP/2 through the real `socketify run`: curl, nghttp, h2load and httpx over h2c and TLS, and
raw h2 clients for what no polite client sends (floods, resets, stalls).

Each limit test checks the worker goes on serving other clients afterwards.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import httpx
import pytest
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame

from tests.server.tls_clients import client_context
from tests.support.pki import CLIENT_NAME, Pki
from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

APP = "tests.server.http2_app"
ENHANCE_YOUR_CALM, REFUSED_STREAM, INTERNAL_ERROR, CANCEL = 0xB, 0x7, 0x2, 0x8
STATIC = b"".join(bytes([n % 251]) for n in range(200_000))
needs_tools = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("curl", "nghttp", "h2load")),
    reason="needs curl, nghttp and h2load (nghttp2-client)",
)


@dataclass
class Servers:
    plain: ServerProcess  # h2c and HTTP/1.1, 2 workers
    tls: ServerProcess  # h2 by ALPN, 1 worker
    tight: ServerProcess  # small HTTP/2 limits, 1 worker
    off: ServerProcess  # --no-http2, HTTPS and plain binds
    off_plain: tuple[str, int]
    context: ssl.SSLContext


@pytest.fixture(scope="module")
def servers(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("static")
    (root / "data.bin").write_bytes(STATIC)
    env = {"H2_STATIC_ROOT": str(root)}
    certs = ("--certfile", pki.server.cert, "--keyfile", pki.server.key)
    context = client_context(pki)
    with Launcher(tmp_path_factory.mktemp("h2")) as launch:
        plain = launch(APP, workers=2, env=env, wait=False)
        tls = launch(APP, args=certs, env=env, tls=context, wait=False)
        tight = launch(f"{APP}:tight", env=env, wait=False)
        off_port = free_port()
        off = launch(
            APP,
            bind=f"https://127.0.0.1:{free_port()}",
            args=(*certs, "--bind", f"http://127.0.0.1:{off_port}", "--no-http2"),
            tls=context,
            wait=False,
        )
        for server in (plain, tls, tight, off):
            server.wait_serving()
        yield Servers(plain, tls, tight, off, ("127.0.0.1", off_port), context)


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "10", *args], capture_output=True, text=True, timeout=15
    )


def h2c_url(server: ServerProcess, target: str) -> str:
    host, port = server.tcp
    return f"http://{host}:{port}{target}"


def h2c_client() -> httpx.Client:
    """httpx speaking HTTP/2 with prior knowledge on a cleartext connection."""
    return httpx.Client(http1=False, http2=True, timeout=10)


class RawH2:
    """An h2 client connection on a plain socket, for sequences real clients never send."""

    def __init__(self, address: tuple[str, int], settings: dict[int, int] | None = None) -> None:
        self.sock = socket.create_connection(address, timeout=5)
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.events: list[h2.events.Event] = []
        self.closed = False  # the server closed the connection (and we read all it sent)
        self.send_failed = False
        self.flush()

    def flush(self) -> None:
        self.send_raw(self.conn.data_to_send())

    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.send_failed = True  # the server hung up on us: what the limit tests expect

    def get(self, target: str, end: bool = True, extra: tuple[tuple[str, str], ...] = ()) -> int:
        sid = self.conn.get_next_available_stream_id()
        host, port = self.sock.getpeername()[:2]
        headers = [(":method", "GET"), (":scheme", "http"), (":authority", f"{host}:{port}"),
                   (":path", target), *extra]  # fmt: skip
        self.conn.send_headers(sid, headers, end_stream=end)
        self.flush()
        return sid

    def read_until(self, done: Callable[[list[h2.events.Event]], bool], timeout: float = 5) -> None:
        end = time.monotonic() + timeout
        while not done(self.events) and time.monotonic() < end and not self.closed:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                self.closed = True
                break
            try:
                self.events += self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True  # h2 takes nothing after a GOAWAY: what followed is moot
                break
            self.flush()

    def goaway(self, timeout: float = 5) -> h2.events.ConnectionTerminated:
        self.read_until(lambda events: any(of(h2.events.ConnectionTerminated, events)), timeout)
        found = of(h2.events.ConnectionTerminated, self.events)
        assert found, self.events
        return found[0]

    def close(self) -> None:
        self.sock.close()


def of(kind: type, events: list[h2.events.Event]) -> list:  # type: ignore[type-arg]
    return [event for event in events if isinstance(event, kind)]


def body_of(events: list[h2.events.Event], sid: int) -> bytes:
    return b"".join(e.data for e in of(h2.events.DataReceived, events) if e.stream_id == sid)


def still_serves(server: ServerProcess) -> None:
    with h2c_client() as client:
        response = client.get(h2c_url(server, "/ping"))
    assert (response.http_version, response.text) == ("HTTP/2", "pong")


# -- clients --------------------------------------------------------------------------------


@needs_tools
def test_curl_h2c_prior_knowledge_and_http_1_1_on_the_same_port(servers: Servers) -> None:
    url = h2c_url(servers.plain, "/version")
    done = curl("--http2-prior-knowledge", "-w", " %{http_version}", url)
    assert re.fullmatch(r"HTTP/2\.0 http 127\.0\.0\.1:\d+ 2", done.stdout), done
    done = curl("-w", " %{http_version}", url)
    assert re.fullmatch(r"HTTP/1\.1 http 127\.0\.0\.1:\d+ 1\.1", done.stdout), done


@needs_tools
def test_curl_http2_over_tls_negotiates_h2_by_alpn(servers: Servers, pki: Pki) -> None:
    port = servers.tls.tcp[1]
    done = curl("--http2", "--cacert", pki.ca, "-w", " %{http_version}",
                f"https://localhost:{port}/version")  # fmt: skip
    assert re.fullmatch(r"HTTP/2\.0 https localhost:\d+ 2", done.stdout), done


@needs_tools
def test_nghttp_gets_a_stream(servers: Servers) -> None:
    done = subprocess.run(
        ["nghttp", h2c_url(servers.plain, "/stream?n=4")],
        capture_output=True, text=True, timeout=15,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "chunk 0;chunk 1;chunk 2;chunk 3;"), done


def test_httpx_h2c_buffered_streamed_and_head(servers: Servers) -> None:
    with h2c_client() as client:
        response = client.get(h2c_url(servers.plain, "/ping"))
        assert (response.http_version, response.status_code, response.text) == (
            "HTTP/2", 200, "pong",
        )  # fmt: skip
        assert response.headers["content-length"] == "4" and "date" in response.headers
        with client.stream("GET", h2c_url(servers.plain, "/stream?n=5")) as streamed:
            assert "content-length" not in streamed.headers
            assert b"".join(streamed.iter_bytes()) == b"".join(
                f"chunk {n};".encode() for n in range(5)
            )
        head = client.head(h2c_url(servers.plain, "/big"), headers={"Accept-Encoding": "identity"})
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == str(len("compress me please " * 4000))


def test_httpx_over_tls_speaks_http2(servers: Servers) -> None:
    port = servers.tls.tcp[1]
    with httpx.Client(http2=True, verify=servers.context, timeout=10) as client:
        response = client.get(f"https://localhost:{port}/version")
    assert response.http_version == "HTTP/2"
    assert response.text.startswith("HTTP/2.0 https ")


def test_a_client_certificate_reaches_the_handler_over_h2(
    mtls_server: ServerProcess, pki: Pki
) -> None:
    port = mtls_server.tcp[1]
    context = client_context(pki, client=True)
    with httpx.Client(http2=True, verify=context, timeout=10) as client:
        response = client.get(f"https://localhost:{port}/whoami")
    assert response.http_version == "HTTP/2"
    assert response.json()["client"] == CLIENT_NAME


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_a_large_request_body_flows_through_the_windows(servers: Servers, tls: bool) -> None:
    body = os.urandom(6 * 1024 * 1024)
    if tls:
        client = httpx.Client(http2=True, verify=servers.context, timeout=20)
        url = f"https://localhost:{servers.tls.tcp[1]}/digest"
    else:
        client = h2c_client()
        url = h2c_url(servers.plain, "/digest")
    with client:
        response = client.post(url, content=body)
    assert response.http_version == "HTTP/2"
    assert response.text == f"{len(body)} {hashlib.sha256(body).hexdigest()}"


def test_100_continue_goes_out_when_the_handler_first_reads(servers: Servers) -> None:
    client = RawH2(servers.plain.tcp)
    sid = client.conn.get_next_available_stream_id()
    host, port = servers.plain.tcp
    client.conn.send_headers(
        sid,
        [(":method", "POST"), (":scheme", "http"), (":authority", f"{host}:{port}"),
         (":path", "/digest"), ("content-length", "5"), ("expect", "100-continue")],
    )  # fmt: skip
    client.flush()
    client.read_until(lambda events: any(of(h2.events.InformationalResponseReceived, events)))
    (interim,) = of(h2.events.InformationalResponseReceived, client.events)
    assert interim.headers == [(":status", "100")]
    client.conn.send_data(sid, b"hello", end_stream=True)
    client.flush()
    client.read_until(lambda events: any(of(h2.events.StreamEnded, events)))
    assert body_of(client.events, sid) == f"5 {hashlib.sha256(b'hello').hexdigest()}".encode()
    client.close()


def test_static_file_whole_and_a_range(servers: Servers) -> None:
    with h2c_client() as client:
        whole = client.get(h2c_url(servers.plain, "/static/data.bin"))
        assert whole.status_code == 200 and whole.content == STATIC
        part = client.get(
            h2c_url(servers.plain, "/static/data.bin"), headers={"Range": "bytes=100000-100099"}
        )
    assert part.status_code == 206 and part.content == STATIC[100000:100100]
    assert part.headers["content-range"] == f"bytes 100000-100099/{len(STATIC)}"


def test_cookies_sessions_and_compression(servers: Servers) -> None:
    with h2c_client() as client:
        response = client.get(h2c_url(servers.plain, "/cookie"), headers={"Cookie": "a=1; b=2"})
        assert response.text == "a=1;b=2"
        assert sorted(response.headers.get_list("set-cookie"))[0].startswith("first=1")
        assert len(response.headers.get_list("set-cookie")) == 2
        counts = [client.get(h2c_url(servers.plain, "/visits")).text for _ in range(3)]
        assert counts == ["1", "2", "3"]
        big = client.get(h2c_url(servers.plain, "/big"), headers={"Accept-Encoding": "gzip"})
    assert big.headers["content-encoding"] == "gzip"
    assert big.text == "compress me please " * 4000


def test_sse_is_a_long_lived_stream(servers: Servers) -> None:
    with h2c_client() as client, client.stream("GET", h2c_url(servers.plain, "/events")) as sse:
        assert sse.headers["content-type"].startswith("text/event-stream")
        text = b"".join(sse.iter_bytes()).decode()
    assert text.startswith("data: hello\n\n")
    assert text.count("event: tick") == 3 and "id: 2\n" in text


def test_sse_to_a_client_that_grants_no_window_is_closed_at_its_backlog_bound(
    servers: Servers,
) -> None:
    # The client lets 1 000 bytes through and then reads nothing: the events wait in the
    # stream's backlog, and the send that finds more than max_backpressure (64 KiB) waiting
    # is dropped and ends the stream, as it would close an HTTP/1.1 event stream.
    client = RawH2(servers.tight.tcp, {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1000})
    sid = client.get("/events-burst")
    client.read_until(lambda events: any(of(h2.events.StreamEnded, events)))
    assert of(h2.events.StreamEnded, client.events)[0].stream_id == sid
    assert len(body_of(client.events, sid)) <= 1000
    with h2c_client() as other:
        sent = other.get(h2c_url(servers.tight, "/burst-result")).text
    assert 60 <= int(sent) <= 70, sent  # 64 KiB of 1 KiB events, and the one that crossed it
    client.close()


def test_access_log_names_http_2(servers: Servers) -> None:
    with h2c_client() as client:
        client.get(h2c_url(servers.plain, "/q?logged-as-h2"))
    servers.plain.wait_output(r'"GET /q\?logged-as-h2 HTTP/2\.0" 200')


def test_100_concurrent_streams_on_one_connection_each_get_their_answer(
    servers: Servers,
) -> None:
    client = RawH2(servers.plain.tcp)
    client.read_until(lambda events: any(of(h2.events.RemoteSettingsChanged, events)))
    ids = {client.get(f"/q?n={n}"): n for n in range(100)}
    client.read_until(lambda events: len(of(h2.events.StreamEnded, events)) == 100)
    assert {sid: body_of(client.events, sid) for sid in ids} == {
        sid: f"n={n}".encode() for sid, n in ids.items()
    }
    assert not of(h2.events.StreamReset, client.events)
    client.close()


@needs_tools
def test_h2load_across_two_workers(servers: Servers) -> None:
    done = subprocess.run(
        ["h2load", "-c", "4", "-m", "50", "-n", "2000", h2c_url(servers.plain, "/pid")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert "2000 succeeded, 0 failed, 0 errored" in done.stdout, done.stdout
    assert "status codes: 2000 2xx" in done.stdout


def test_no_http2_offers_only_http_1_1_and_refuses_the_preface(servers: Servers) -> None:
    context = client_context_offering_h2(servers.context)
    with (
        socket.create_connection(servers.off.tcp) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        assert sock.selected_alpn_protocol() == "http/1.1"
    with socket.create_connection(servers.off_plain, timeout=5) as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 4") or answer.startswith(b"HTTP/1.1 5"), answer


def client_context_offering_h2(base: ssl.SSLContext) -> ssl.SSLContext:
    base.set_alpn_protocols(["h2", "http/1.1"])
    return base


# -- errors and stopping --------------------------------------------------------------------


def test_a_stream_that_fails_after_its_headers_is_reset(servers: Servers) -> None:
    client = RawH2(servers.plain.tcp)
    sid = client.get("/stream-fail")
    client.read_until(lambda events: any(of(h2.events.StreamReset, events)))
    assert of(h2.events.ResponseReceived, client.events)[0].headers[0] == (":status", "200")
    assert body_of(client.events, sid) == b"a good start;"
    (reset,) = of(h2.events.StreamReset, client.events)
    assert (reset.stream_id, reset.error_code) == (sid, INTERNAL_ERROR)
    assert not of(h2.events.StreamEnded, client.events)
    client.close()


@needs_tools
def test_graceful_stop_says_goaway_and_finishes_the_slow_stream(serve: Launcher) -> None:
    # nghttp, not h2's client: h2 drops every frame that follows a GOAWAY it received.
    server = serve(APP)
    client = subprocess.Popen(
        ["nghttp", "-v", h2c_url(server, "/sleep?s=1.5")], stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.5)  # the stream is in its handler
    server.signal(signal.SIGTERM)
    output, _ = client.communicate(timeout=15)
    goaway = output.index("recv GOAWAY frame")
    assert "error_code=NO_ERROR" in output[goaway:]
    assert output.index("slept 1.5") > goaway, output
    assert client.returncode == 0
    assert server.wait_exit(10) == 0


def test_a_reload_says_goaway_to_an_open_connection_and_new_workers_serve(
    serve: Launcher,
) -> None:
    server = serve(APP)
    client = RawH2(server.tcp)
    sid = client.get("/ping")
    client.read_until(lambda events: any(of(h2.events.StreamEnded, events)))
    server.signal(signal.SIGHUP)
    goaway = client.goaway(timeout=10)
    assert (goaway.error_code, goaway.last_stream_id) == (0, sid)
    client.close()
    still_serves(server)


def test_an_idle_connection_gets_goaway_and_is_closed(servers: Servers) -> None:
    client = RawH2(servers.tight.tcp)
    sid = client.get("/ping")
    client.read_until(lambda events: any(of(h2.events.StreamEnded, events)))
    answered = time.monotonic()
    goaway = client.goaway(timeout=5)
    assert (goaway.error_code, goaway.last_stream_id) == (0, sid)
    assert 1.2 < time.monotonic() - answered < 3.5  # idle_timeout is 1.5 s
    client.read_until(lambda events: False, timeout=2)
    assert client.closed  # and the socket was closed after it
    client.close()


# -- limits (the `tight` server: 10 streams, 20 resets/pings/settings a second, 4 KiB headers)


def test_streams_past_the_limit_are_refused(servers: Servers) -> None:
    client = RawH2(servers.tight.tcp)
    client.read_until(lambda events: any(of(h2.events.RemoteSettingsChanged, events)))
    assert client.conn.remote_settings.max_concurrent_streams == 10
    # A client that ignores the advertised limit (h2's own client would obey it).
    client.conn.remote_settings = h2.settings.Settings(client=False)
    ids = [client.get("/sleep?s=0.3") for _ in range(14)]
    client.read_until(
        lambda events: (
            len(of(h2.events.StreamEnded, events) + of(h2.events.StreamReset, events)) == 14
        )
    )
    refused = [e.stream_id for e in of(h2.events.StreamReset, client.events)]
    assert refused == ids[10:]
    assert all(e.error_code == REFUSED_STREAM for e in of(h2.events.StreamReset, client.events))
    assert len(of(h2.events.StreamEnded, client.events)) == 10
    client.close()
    still_serves(servers.tight)


def test_rapid_reset_gets_goaway_enhance_your_calm(servers: Servers) -> None:
    client = RawH2(servers.tight.tcp)
    for _ in range(60):
        sid = client.get("/sleep?s=5", end=False)
        client.conn.reset_stream(sid)
        client.flush()
        if client.send_failed:
            break
    assert client.goaway().error_code == ENHANCE_YOUR_CALM
    client.close()
    still_serves(servers.tight)


@pytest.mark.parametrize(
    "frame",
    [PingFrame(0, opaque_data=b"flooding"), SettingsFrame(0)],
    ids=["ping", "settings"],
)
def test_control_frame_floods_get_goaway_enhance_your_calm(
    servers: Servers, frame: PingFrame | SettingsFrame
) -> None:
    client = RawH2(servers.tight.tcp)
    client.send_raw(frame.serialize() * 100)
    assert client.goaway().error_code == ENHANCE_YOUR_CALM
    client.close()
    still_serves(servers.tight)


def test_an_oversized_header_list_ends_the_connection(servers: Servers) -> None:
    client = RawH2(servers.tight.tcp)
    client.get("/ping", extra=(("x-big", "v" * 8000),))
    assert client.goaway().error_code != 0
    client.close()
    still_serves(servers.tight)


def test_a_continuation_flood_is_cut_off(servers: Servers) -> None:
    client = RawH2(servers.tight.tcp)
    raw = HeadersFrame(1, data=b"\x82\x86\x84", flags=()).serialize()
    raw += ContinuationFrame(1, data=b"\x00" * 1000, flags=()).serialize() * 60
    client.send_raw(raw)
    assert client.goaway().error_code == ENHANCE_YOUR_CALM
    client.close()
    still_serves(servers.tight)


def test_a_sender_stalled_on_a_zero_window_is_reset_after_the_send_timeout(
    servers: Servers,
) -> None:
    client = RawH2(servers.tight.tcp, {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    started = time.monotonic()
    sid = client.get("/big")
    client.read_until(lambda events: any(of(h2.events.StreamReset, events)))
    (reset,) = of(h2.events.StreamReset, client.events)
    assert (reset.stream_id, reset.error_code) == (sid, CANCEL)
    assert 0.8 < time.monotonic() - started < 4
    assert of(h2.events.ResponseReceived, client.events)  # the headers needed no window
    client.close()
    still_serves(servers.tight)
