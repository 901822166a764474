"""HTTP/2 conformance of the real server over cleartext h2c, frame by frame.

Grouped the way RFC 9113 is (and RFC 7541 for HPACK): the connection preface, frame sizes
and definitions, stream states, flow control, SETTINGS, PING, GOAWAY and RST_STREAM, header
blocks, malformed requests, and the limits that keep one abusive client from hurting the
others (concurrent streams, header list size, CONTINUATION and control-frame floods, rapid
reset). Every test writes exact frames with `tests.support.raw_h2` and checks the exact frame
and error code the server answers with; where the RFC lets the server choose between a stream
error and a connection error, either passes. A failure prints the frame exchange.

After every test, abusive or not, a fresh connection must get an answer from the same worker
(one worker; `/pid` tells): a protocol error closes one connection, never the process.

`H2_CONFORMANCE_TARGET=host:port` points the module at a server that is already running (any
h2c server with the routes of tests.support.apps.http2) instead of starting
`socketify run tests.support.apps.http2:server`: a way to check the tests themselves against
another implementation.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping

import pytest
from hyperframe.frame import (
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from tests.support.raw_client import get as http11_get
from tests.support.raw_h2 import (
    ACK,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    MAX_WINDOW,
    PADDED,
    PREFACE,
    ErrorCode,
    FrameType,
    H2Client,
    Setting,
    frame,
    settings_payload,
)
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(60)

TARGET_ENV = "H2_CONFORMANCE_TARGET"
APP = "tests.support.apps.http2:server"
QUIET = 0.5  # how long the server must stay silent when it has nothing it may send
# Codes a server may choose to end a connection whose client will not stop.
CALM_CODES = (ErrorCode.ENHANCE_YOUR_CALM, ErrorCode.PROTOCOL_ERROR)

Connect = Callable[..., H2Client]


# -- the server and its clients -------------------------------------------------------------


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """Where the server under test listens: ours, started here, or H2_CONFORMANCE_TARGET."""
    target = os.environ.get(TARGET_ENV)
    if target:
        host, _, port = target.rpartition(":")
        yield host.strip("[]"), int(port)
        return
    # The run's own PYTHONPATH goes first for the server too, so `PYTHONPATH=OTHER_TREE` checks
    # another tree's server against these tests.
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with Launcher(tmp_path_factory.mktemp("h2")) as launcher:
        yield launcher(APP, workers=1, env=env).tcp


def answers(address: tuple[str, int]) -> bytes:
    """The worker pid a fresh connection's normal request gets back."""
    with H2Client.connect(address) as client:
        client.handshake()
        response = client.get("/pid")
        if response.status != 200:
            client.fail(f"/pid answered {response.status}")
        return response.body


@pytest.fixture(scope="module")
def worker(address: tuple[str, int]) -> bytes:
    """The pid of the worker that serves the module's connections."""
    return answers(address)


@pytest.fixture
def connect(address: tuple[str, int], worker: bytes) -> Iterator[Connect]:
    """Open clients to the server (handshake done unless `handshake=False`); afterwards,
    the same worker must still answer a fresh connection."""
    opened: list[H2Client] = []

    def open_client(
        settings: Mapping[int, int] | None = None, *, handshake: bool = True
    ) -> H2Client:
        client = H2Client.connect(address)
        opened.append(client)
        if handshake:
            client.handshake(settings)
        return client

    yield open_client
    for client in opened:
        client.close()
    assert answers(address) == worker, "a different worker answers: the first one died"


@pytest.fixture
def client(connect: Connect) -> H2Client:
    """A connection past its preface and SETTINGS exchange."""
    return connect()


def open_stream(client: H2Client, path: str = "/echo") -> int:
    """A stream the server keeps open: a POST whose body has not come yet."""
    stream_id = client.new_stream()
    client.send_headers(stream_id, client.request_headers("POST", path), end_stream=False)
    return stream_id


def headers_frame(client: H2Client, stream_id: int, path: str = "/ping", flags: int = 0) -> bytes:
    """A raw HEADERS frame carrying a GET of `path`, with exactly `flags`."""
    block = client.encoder.encode(client.request_headers("GET", path))
    return frame(FrameType.HEADERS, flags, stream_id, block)


def hpack_integer(value: int, prefix_bits: int, pattern: int) -> bytes:
    """An HPACK integer with an N-bit prefix, the prefix byte's high bits set to `pattern`."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((pattern | value,))
    out = [pattern | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# -- RFC 9113 §3.4: the connection preface --------------------------------------------------


def test_the_server_opens_with_settings_on_stream_zero(connect: Connect) -> None:
    client = connect(handshake=False)
    client.send(PREFACE, SettingsFrame(0))
    first = client.next_frame()
    assert first is not None, client.exchange()
    assert (first.kind, first.stream_id, first.has("ACK")) == (FrameType.SETTINGS, 0, False), (
        client.exchange()
    )


def test_the_clients_settings_are_acknowledged_with_an_empty_ack(connect: Connect) -> None:
    client = connect(handshake=False)
    client.handshake({Setting.MAX_CONCURRENT_STREAMS: 10}, wait_ack=False)
    ack = client.read_until(lambda r: r.kind == FrameType.SETTINGS and r.has("ACK"))
    assert (ack.stream_id, ack.frame.settings) == (0, {}), client.exchange()


def test_a_preface_not_followed_by_settings_is_a_protocol_error(connect: Connect) -> None:
    client = connect(handshake=False)
    client.send(PREFACE, PingFrame(0, b"12345678"))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_a_corrupted_preface_is_never_taken_for_http2(connect: Connect) -> None:
    # One byte off the magic: no HTTP/2 connection, and no successful HTTP/1.1 answer either.
    client = connect(handshake=False)
    client.send(PREFACE.replace(b"SM", b"XM"), SettingsFrame(0))
    received = bytearray()
    deadline = time.monotonic() + client.timeout
    client.sock.settimeout(client.timeout)
    while time.monotonic() < deadline:
        try:
            chunk = client.sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    else:
        pytest.fail(f"the connection stays open after a corrupted preface: {bytes(received)!r}")
    if received.startswith(b"HTTP/"):
        status = int(received.split(b" ", 2)[1])
        assert status >= 400, bytes(received[:200])
    else:
        # In HTTP/2 terms at most the server's SETTINGS, and a GOAWAY for PROTOCOL_ERROR.
        while len(received) >= 9:
            length, kind = int.from_bytes(received[:3], "big"), received[3]
            payload = bytes(received[9 : 9 + length])
            del received[: 9 + length]
            assert kind in (FrameType.SETTINGS, FrameType.GOAWAY), (kind, payload)
            if kind == FrameType.GOAWAY:
                assert payload[4:8] == ErrorCode.PROTOCOL_ERROR.to_bytes(4, "big"), payload
        assert not received, bytes(received)


def test_http11_still_works_on_the_cleartext_port(address: tuple[str, int]) -> None:
    response = http11_get(address, "/ping")
    assert (response.status, response.body) == (200, b"pong")


# -- RFC 9113 §4: frame format and size -----------------------------------------------------


def test_frames_of_unknown_types_are_ignored(client: H2Client) -> None:
    client.send(frame(0xFA, 0, 0, b"12345678"), frame(0xFB, 0xFF, 1, b"ignored"))
    assert client.get("/ping").body == b"pong", client.exchange()


def test_unknown_flags_are_ignored(client: H2Client) -> None:
    client.send(frame(FrameType.PING, 0x16 | 0xE0, 0, b"flagged!"))
    ack = client.read_until(lambda r: r.kind == FrameType.PING)
    assert ack.has("ACK") and bytes(ack.frame.opaque_data) == b"flagged!", client.exchange()


def test_the_reserved_bit_of_the_stream_identifier_is_ignored(client: H2Client) -> None:
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    stream_id = client.new_stream()
    client.send(frame(FrameType.HEADERS, END_STREAM | END_HEADERS, stream_id, block, reserved=True))
    assert client.response(stream_id).body == b"pong", client.exchange()


def test_data_over_max_frame_size_is_a_frame_size_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    oversized = b"x" * (client.max_send_frame + 1)
    client.send(frame(FrameType.DATA, END_STREAM, stream_id, oversized))
    client.expect_stream_error(stream_id, ErrorCode.FRAME_SIZE_ERROR)


def test_headers_over_max_frame_size_are_a_connection_error(client: H2Client) -> None:
    # A frame that carries a header block alters the connection's HPACK state.
    pad = ("x-pad", "a" * client.max_send_frame)
    block = client.encoder.encode(client.request_headers("GET", "/ping", [pad]), huffman=False)
    client.send(frame(FrameType.HEADERS, END_STREAM | END_HEADERS, 1, block))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_a_frame_header_announcing_more_than_max_frame_size_is_refused(
    client: H2Client,
) -> None:
    # Only the header of a 16 MiB frame: the server must not wait for (or buffer) its payload.
    client.send(((1 << 24) - 1).to_bytes(3, "big") + bytes((FrameType.PING, 0)) + bytes(4))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


# -- RFC 9113 §6.1: DATA --------------------------------------------------------------------


def test_data_on_stream_zero_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.DATA, 0, 0, b"stray"))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_data_with_padding_as_long_as_the_payload_is_a_protocol_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(frame(FrameType.DATA, PADDED | END_STREAM, stream_id, bytes((4,)) + b"abc"))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_padded_data_is_accepted_and_counted(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(DataFrame(stream_id, b"hello", pad_length=20, flags=["PADDED", "END_STREAM"]))
    assert client.response(stream_id).body == b"hello", client.exchange()


# -- RFC 9113 §6.2 and §6.10: HEADERS and CONTINUATION --------------------------------------


def test_headers_on_stream_zero_are_a_protocol_error(client: H2Client) -> None:
    client.send(headers_frame(client, 0, flags=END_STREAM | END_HEADERS))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_headers_with_padding_as_long_as_the_payload_are_a_protocol_error(
    client: H2Client,
) -> None:
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    payload = bytes((len(block) + 1,)) + block
    client.send(frame(FrameType.HEADERS, END_STREAM | END_HEADERS | PADDED, 1, payload))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_padded_headers_with_priority_are_accepted(client: H2Client) -> None:
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    stream_id = client.new_stream()
    headers = HeadersFrame(stream_id, block, pad_length=7, depends_on=0, stream_weight=200)
    for flag in ("PADDED", "PRIORITY", "END_HEADERS", "END_STREAM"):
        headers.flags.add(flag)
    client.send(headers)
    assert client.response(stream_id).body == b"pong", client.exchange()


def test_a_request_split_over_continuation_frames_is_answered(client: H2Client) -> None:
    stream_id = client.new_stream()
    extra = [(f"x-part-{i}", "v" * 40) for i in range(10)]
    headers = client.request_headers("GET", "/ping", extra)
    client.send_headers(stream_id, headers, max_fragment=100)  # one HEADERS, 4 CONTINUATION
    assert client.response(stream_id).body == b"pong", client.exchange()


@pytest.mark.parametrize(
    "interruption",
    ["priority", "headers-on-another-stream", "data", "unknown-frame", "ping"],
)
def test_any_frame_inside_a_header_block_is_a_protocol_error(
    client: H2Client, interruption: str
) -> None:
    # Between HEADERS and its last CONTINUATION only CONTINUATION frames of that stream.
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    others = {
        "priority": PriorityFrame(1, depends_on=0, stream_weight=16).serialize(),
        "headers-on-another-stream": headers_frame(client, 3, flags=END_STREAM | END_HEADERS),
        "data": frame(FrameType.DATA, 0, 1, b"x"),
        "unknown-frame": frame(0xFA, 0, 1, b"x"),
        "ping": PingFrame(0, b"12345678").serialize(),
    }
    client.send(
        frame(FrameType.HEADERS, END_STREAM, 1, block[:2]),
        others[interruption],
        frame(FrameType.CONTINUATION, END_HEADERS, 1, block[2:]),
    )
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_continuation_without_headers_is_a_protocol_error(client: H2Client) -> None:
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    client.send(frame(FrameType.CONTINUATION, END_HEADERS, 1, block))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_continuation_after_end_headers_is_a_protocol_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    block = client.encoder.encode([("x-late", "1")])
    client.send(frame(FrameType.CONTINUATION, END_HEADERS, stream_id, block))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_continuation_on_stream_zero_is_a_protocol_error(client: H2Client) -> None:
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    client.send(
        frame(FrameType.HEADERS, END_STREAM, 1, block[:2]),
        frame(FrameType.CONTINUATION, END_HEADERS, 0, block[2:]),
    )
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


# -- RFC 9113 §6.3: PRIORITY ----------------------------------------------------------------


def test_priority_on_stream_zero_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.PRIORITY, 0, 0, bytes(4) + b"\x10"))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_priority_of_the_wrong_length_is_a_frame_size_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(frame(FrameType.PRIORITY, 0, stream_id, bytes(4)))
    client.expect_stream_error(stream_id, ErrorCode.FRAME_SIZE_ERROR)


def test_a_priority_frame_making_a_stream_depend_on_itself_is_a_protocol_error(
    client: H2Client,
) -> None:
    stream_id = open_stream(client)
    client.send(PriorityFrame(stream_id, depends_on=stream_id, stream_weight=16))
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)


def test_headers_making_a_stream_depend_on_itself_are_a_protocol_error(
    client: H2Client,
) -> None:
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    stream_id = client.new_stream()
    headers = HeadersFrame(stream_id, block, depends_on=stream_id, stream_weight=16)
    for flag in ("PRIORITY", "END_HEADERS", "END_STREAM"):
        headers.flags.add(flag)
    client.send(headers)
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)


def test_priority_on_idle_and_closed_streams_is_accepted(client: H2Client) -> None:
    client.send(PriorityFrame(3, depends_on=0, stream_weight=100))  # stream 3 is idle
    answered = client.get("/ping")  # opens stream 1
    client.send(PriorityFrame(answered.stream_id, depends_on=0, stream_weight=10))  # closed
    client.skip_to_stream(3)
    assert client.get("/ping").stream_id == 3
    client.ping()


# -- RFC 9113 §6.4: RST_STREAM --------------------------------------------------------------


def test_rst_stream_on_stream_zero_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.RST_STREAM, 0, 0, ErrorCode.CANCEL.to_bytes(4, "big")))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_rst_stream_on_an_idle_stream_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.RST_STREAM, 0, 5, ErrorCode.CANCEL.to_bytes(4, "big")))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_rst_stream_of_the_wrong_length_is_a_frame_size_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(frame(FrameType.RST_STREAM, 0, stream_id, bytes(3)))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_after_rst_stream_the_server_stops_sending_on_it(client: H2Client) -> None:
    # Windows wide open, so only the reset can stop a 64 MiB response.
    client.send_settings({Setting.INITIAL_WINDOW_SIZE: MAX_WINDOW})
    client.grant(WindowUpdateFrame(0, MAX_WINDOW - DEFAULT_WINDOW))
    client.auto_window = False
    stream_id = client.request("GET", f"/large?size={64 << 20}")
    client.read_until(lambda r: r.kind == FrameType.DATA and r.stream_id == stream_id)
    client.reset(stream_id)
    before = client.ping(timeout=20)  # what was on its way before the reset took effect
    sent_before = sum(len(r.frame.data) for r in before if r.kind == FrameType.DATA)
    after = client.frames_within(1.0)
    late = sum(len(r.frame.data) for r in after if r.stream_id == stream_id)
    assert late <= 1 << 20, (sent_before, late, client.exchange())
    client.auto_window = True
    assert client.get("/ping").body == b"pong", client.exchange()


def test_frames_on_a_stream_the_client_reset_are_stream_closed(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.reset(stream_id)
    client.send(frame(FrameType.DATA, END_STREAM, stream_id, b"late"))
    client.expect_stream_error(stream_id, ErrorCode.STREAM_CLOSED)


# -- RFC 9113 §6.5: SETTINGS ----------------------------------------------------------------


def test_a_settings_ack_with_a_payload_is_a_frame_size_error(client: H2Client) -> None:
    client.send(frame(FrameType.SETTINGS, ACK, 0, settings_payload({Setting.ENABLE_PUSH: 0})))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_settings_on_a_stream_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.SETTINGS, 0, 1, settings_payload({Setting.ENABLE_PUSH: 0})))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_settings_of_a_length_not_a_multiple_of_six_is_a_frame_size_error(
    client: H2Client,
) -> None:
    client.send(frame(FrameType.SETTINGS, 0, 0, settings_payload({Setting.ENABLE_PUSH: 0})[:5]))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


@pytest.mark.parametrize(
    ("setting", "value", "code"),
    [
        (Setting.ENABLE_PUSH, 2, ErrorCode.PROTOCOL_ERROR),
        (Setting.INITIAL_WINDOW_SIZE, MAX_WINDOW + 1, ErrorCode.FLOW_CONTROL_ERROR),
        (Setting.MAX_FRAME_SIZE, 16_383, ErrorCode.PROTOCOL_ERROR),
        (Setting.MAX_FRAME_SIZE, 1 << 24, ErrorCode.PROTOCOL_ERROR),
    ],
    ids=["enable-push-2", "window-over-2^31-1", "frame-size-16383", "frame-size-2^24"],
)
def test_a_setting_out_of_range_is_a_connection_error(
    client: H2Client, setting: Setting, value: int, code: ErrorCode
) -> None:
    client.send(frame(FrameType.SETTINGS, 0, 0, settings_payload({setting: value})))
    client.expect_connection_error(code)


def test_settings_values_apply_in_the_order_they_appear(connect: Connect) -> None:
    # The same setting twice in one frame: the last value counts.
    client = connect()
    client.auto_window = False
    payload = settings_payload({Setting.INITIAL_WINDOW_SIZE: 100}) + settings_payload(
        {Setting.INITIAL_WINDOW_SIZE: 10}
    )
    client.send(frame(FrameType.SETTINGS, 0, 0, payload))
    client.read_until(lambda r: r.kind == FrameType.SETTINGS and r.has("ACK"))
    stream_id = client.request("GET", "/large?size=1000")
    client.frames_within(QUIET)
    assert len(client.responses[stream_id].data) == 10, client.exchange()


def test_unknown_settings_are_ignored_and_acknowledged(client: H2Client) -> None:
    client.send(frame(FrameType.SETTINGS, 0, 0, settings_payload({0xFF: 1, 0x4242: 7})))
    client.read_until(lambda r: r.kind == FrameType.SETTINGS and r.has("ACK"))
    assert client.get("/ping").body == b"pong", client.exchange()


def test_a_larger_max_frame_size_lets_the_server_send_larger_frames(connect: Connect) -> None:
    client = connect({Setting.MAX_FRAME_SIZE: 65_536, Setting.INITIAL_WINDOW_SIZE: 1 << 20})
    response = client.get("/large?size=262144")
    assert len(response.body) == 262_144 and max(response.data_frames) <= 65_536


# -- RFC 9113 §6.7: PING --------------------------------------------------------------------


def test_a_ping_is_answered_with_the_same_payload(client: H2Client) -> None:
    client.ping(b"\x00\x01\x02\x03\xfc\xfd\xfe\xff")


def test_a_ping_ack_from_the_client_is_not_answered(client: H2Client) -> None:
    client.send(PingFrame(0, b"unasked!", flags=["ACK"]))
    before = client.ping(b"asked!!!")
    assert not [r for r in before if r.kind == FrameType.PING], client.exchange()


def test_a_ping_on_a_stream_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.PING, 0, 1, b"12345678"))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


@pytest.mark.parametrize("length", [6, 9])
def test_a_ping_of_a_length_other_than_eight_is_a_frame_size_error(
    client: H2Client, length: int
) -> None:
    client.send(frame(FrameType.PING, 0, 0, b"p" * length))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


# -- RFC 9113 §6.8: GOAWAY ------------------------------------------------------------------


def test_goaway_on_a_stream_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.GOAWAY, 0, 1, bytes(8)))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_the_servers_goaway_names_the_last_stream_it_processed(client: H2Client) -> None:
    client.get("/ping")
    answered = client.get("/ping")
    client.send(frame(FrameType.DATA, 0, 0, b"stray"))
    goaway = client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)
    assert goaway.frame.last_stream_id == answered.stream_id, client.exchange()


def test_a_goaway_from_the_client_still_gets_its_open_streams_answered(client: H2Client) -> None:
    # The client's GOAWAY names the last *server*-initiated stream: none, here; its own
    # requests are still answered.
    stream_id = client.request("POST", "/echo", body=b"before goaway")
    client.send(GoAwayFrame(0, last_stream_id=0, error_code=ErrorCode.NO_ERROR))
    assert client.response(stream_id).body == b"before goaway", client.exchange()
    for received in client.frames_within(QUIET):
        if received.kind == FrameType.GOAWAY:
            assert received.error_code == ErrorCode.NO_ERROR, client.exchange()


# -- RFC 9113 §6.9: WINDOW_UPDATE and flow control ------------------------------------------


def test_a_connection_window_update_of_zero_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.WINDOW_UPDATE, 0, 0, bytes(4)))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_a_stream_window_update_of_zero_is_a_protocol_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(frame(FrameType.WINDOW_UPDATE, 0, stream_id, bytes(4)))
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)


def test_a_window_update_of_the_wrong_length_is_a_frame_size_error(client: H2Client) -> None:
    client.send(frame(FrameType.WINDOW_UPDATE, 0, 0, (1).to_bytes(3, "big")))
    client.expect_connection_error(ErrorCode.FRAME_SIZE_ERROR)


def test_a_window_update_on_an_idle_stream_is_a_protocol_error(client: H2Client) -> None:
    client.send(WindowUpdateFrame(5, 100))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_a_connection_window_over_2_31_minus_1_is_a_flow_control_error(
    client: H2Client,
) -> None:
    client.send(WindowUpdateFrame(0, MAX_WINDOW), WindowUpdateFrame(0, MAX_WINDOW))
    client.expect_connection_error(ErrorCode.FLOW_CONTROL_ERROR)


def test_a_stream_window_over_2_31_minus_1_is_a_flow_control_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(WindowUpdateFrame(stream_id, MAX_WINDOW))
    client.expect_stream_error(stream_id, ErrorCode.FLOW_CONTROL_ERROR)


def test_the_server_sends_no_more_than_a_small_stream_window(connect: Connect) -> None:
    client = connect({Setting.INITIAL_WINDOW_SIZE: 100})
    client.auto_window = False
    stream_id = client.request("GET", "/large?size=1000")
    quiet = client.frames_within(QUIET)
    assert sum(len(r.frame.data) for r in quiet if r.kind == FrameType.DATA) == 100, (
        client.exchange()
    )
    client.grant(WindowUpdateFrame(stream_id, 900))
    assert len(client.response(stream_id).body) == 1000, client.exchange()


def test_the_server_sends_no_more_than_the_connection_window(connect: Connect) -> None:
    client = connect({Setting.INITIAL_WINDOW_SIZE: MAX_WINDOW})
    client.auto_window = False
    stream_id = client.request("GET", "/large?size=200000")
    quiet = client.frames_within(QUIET)
    sent = sum(len(r.frame.data) for r in quiet if r.kind == FrameType.DATA)
    assert sent == DEFAULT_WINDOW, client.exchange()
    client.grant(WindowUpdateFrame(0, 200_000))
    assert len(client.response(stream_id).body) == 200_000, client.exchange()


def test_a_new_initial_window_size_applies_to_open_streams(connect: Connect) -> None:
    client = connect({Setting.INITIAL_WINDOW_SIZE: 0})
    client.auto_window = False
    stream_id = client.request("GET", "/large?size=1000")
    before = client.frames_within(QUIET)
    assert not [r for r in before if r.kind == FrameType.DATA], client.exchange()
    client.send_settings({Setting.INITIAL_WINDOW_SIZE: 600})
    after = client.frames_within(QUIET)
    assert sum(len(r.frame.data) for r in after if r.stream_id == stream_id) == 600, (
        client.exchange()
    )
    client.grant(WindowUpdateFrame(stream_id, 400))
    assert len(client.response(stream_id).body) == 1000, client.exchange()


def test_a_smaller_initial_window_can_leave_a_stream_window_negative(
    connect: Connect,
) -> None:
    # 100 granted and spent, the window then shrinks by 50 to -50: a WINDOW_UPDATE of 60
    # leaves room for exactly 10 more bytes.
    client = connect({Setting.INITIAL_WINDOW_SIZE: 100})
    client.auto_window = False
    stream_id = client.request("GET", "/large?size=1000")
    client.frames_within(QUIET)
    assert len(client.responses[stream_id].data) == 100, client.exchange()
    client.send_settings({Setting.INITIAL_WINDOW_SIZE: 50})
    client.wait_settings_ack()
    client.grant(WindowUpdateFrame(stream_id, 60))
    client.frames_within(QUIET)
    assert len(client.responses[stream_id].data) == 110, client.exchange()


def test_a_large_response_arrives_whole_in_frames_within_the_default_size(
    client: H2Client,
) -> None:
    response = client.get("/large?size=1048576")
    pattern = bytes(range(251)) * (len(response.body) // 251 + 1)
    assert response.body == pattern[: 1 << 20]
    assert max(response.data_frames) <= 16_384


def test_a_request_body_larger_than_the_initial_window_is_received(client: H2Client) -> None:
    body = os.urandom(300_000)
    stream_id = client.request("POST", "/echo", body=body)
    assert client.response(stream_id, timeout=20).body == body


# -- RFC 9113 §5.1: stream states and identifiers -------------------------------------------


def test_data_on_an_idle_stream_is_a_protocol_error(client: H2Client) -> None:
    client.send(frame(FrameType.DATA, END_STREAM, 1, b"idle"))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_data_after_the_clients_end_stream_is_stream_closed(client: H2Client) -> None:
    stream_id = client.request("GET", "/ping")
    client.send(frame(FrameType.DATA, END_STREAM, stream_id, b"late"))
    client.expect_stream_error(stream_id, ErrorCode.STREAM_CLOSED, answered=True)


def test_data_on_a_closed_stream_is_stream_closed(client: H2Client) -> None:
    stream_id = client.get("/ping").stream_id
    client.send(frame(FrameType.DATA, END_STREAM, stream_id, b"late"))
    client.expect_stream_error(stream_id, ErrorCode.STREAM_CLOSED, answered=True)


def test_headers_on_a_closed_stream_are_an_error(client: H2Client) -> None:
    stream_id = client.get("/ping").stream_id
    client.send(headers_frame(client, stream_id, flags=END_STREAM | END_HEADERS))
    # A closed stream (STREAM_CLOSED), or a stream identifier used twice (PROTOCOL_ERROR).
    client.expect_stream_error(
        stream_id, ErrorCode.STREAM_CLOSED, ErrorCode.PROTOCOL_ERROR, answered=True
    )


def test_a_push_promise_from_the_client_is_a_protocol_error(client: H2Client) -> None:
    stream_id = open_stream(client)
    block = client.encoder.encode(client.request_headers("GET", "/ping"))
    promised = (2).to_bytes(4, "big")
    client.send(frame(FrameType.PUSH_PROMISE, END_HEADERS, stream_id, promised + block))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_an_even_stream_identifier_from_the_client_is_a_protocol_error(client: H2Client) -> None:
    client.send(headers_frame(client, 2, flags=END_STREAM | END_HEADERS))
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_a_decreasing_stream_identifier_is_a_protocol_error(client: H2Client) -> None:
    client.send(
        headers_frame(client, 5, flags=END_STREAM | END_HEADERS),
        headers_frame(client, 3, flags=END_STREAM | END_HEADERS),
    )
    client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)


def test_concurrent_streams_are_answered_independently(client: H2Client) -> None:
    first = client.request("POST", "/echo", body=b"one")
    second = client.request("GET", "/ping")
    assert client.response(second).body == b"pong", client.exchange()
    assert client.response(first).body == b"one", client.exchange()


def test_streams_beyond_the_advertised_limit_are_refused(client: H2Client) -> None:
    limit = client.server_settings.get(Setting.MAX_CONCURRENT_STREAMS)
    assert limit is not None and 0 < limit <= 1000, client.server_settings
    opened = [client.new_stream() for _ in range(limit)]
    blocks = [
        frame(FrameType.HEADERS, END_HEADERS, stream_id, client.encoder.encode(
            client.request_headers("POST", "/echo")))
        for stream_id in opened
    ]  # fmt: skip
    client.send(*blocks)
    extra = client.new_stream()
    client.send_headers(extra, client.request_headers("POST", "/echo"), end_stream=False)
    refused = client.read_until(lambda r: r.kind in (FrameType.RST_STREAM, FrameType.GOAWAY))
    assert refused.kind == FrameType.RST_STREAM and refused.stream_id == extra, client.exchange()
    assert refused.error_code in (ErrorCode.REFUSED_STREAM, ErrorCode.PROTOCOL_ERROR)
    for stream_id in opened:
        client.reset(stream_id)
    assert client.get("/ping").body == b"pong", client.exchange()


# -- RFC 7541: header compression -----------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b"\x80", id="index-zero"),
        pytest.param(hpack_integer(70, 7, 0x80), id="index-past-the-tables"),
        pytest.param(b"\x82" + hpack_integer(0, 5, 0x20) + b"\x86\x84", id="size-update-late"),
        pytest.param(hpack_integer(1 << 20, 5, 0x20) + b"\x82\x86\x84", id="size-update-large"),
        pytest.param(b"\x82\x86\x84\x00\x01x\x82\x1f\xff", id="huffman-padding-over-7-bits"),
        pytest.param(b"\x82\x86\x84\x00\x01x\x84\xff\xff\xff\xff", id="huffman-eos"),
        pytest.param(b"\x82\x86\x84\x00\x01x\x7f\x00", id="string-longer-than-block"),
    ],
)
def test_an_undecodable_header_block_is_a_compression_error(client: H2Client, block: bytes) -> None:
    client.send(frame(FrameType.HEADERS, END_STREAM | END_HEADERS, 1, block))
    client.expect_connection_error(ErrorCode.COMPRESSION_ERROR)


def test_the_dynamic_table_carries_over_between_requests(client: H2Client) -> None:
    for _ in range(3):  # the second and third blocks refer to entries the first added
        stream_id = client.request("POST", "/echo", body=b"x", headers=[("x-same", "v" * 50)])
        assert client.response(stream_id).body == b"x", client.exchange()


# -- RFC 9113 §8.1-8.3: malformed requests --------------------------------------------------

GET_PING = [(":method", "GET"), (":scheme", "http"), (":path", "/ping")]


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param([*GET_PING, ("X-Upper", "1")], id="uppercase-name"),
        pytest.param([*GET_PING, ("x bad", "1")], id="space-in-name"),
        pytest.param([*GET_PING, ("x-bad", "a\r\nb")], id="crlf-in-value"),
        pytest.param([*GET_PING, ("x-bad", "a\x00b")], id="nul-in-value"),
        pytest.param([*GET_PING, ("connection", "keep-alive")], id="connection"),
        pytest.param([*GET_PING, ("keep-alive", "timeout=5")], id="keep-alive"),
        pytest.param([*GET_PING, ("proxy-connection", "keep-alive")], id="proxy-connection"),
        pytest.param([*GET_PING, ("transfer-encoding", "chunked")], id="transfer-encoding"),
        pytest.param([*GET_PING, ("upgrade", "h2c")], id="upgrade"),
        pytest.param([*GET_PING, ("te", "gzip")], id="te-not-trailers"),
        pytest.param(GET_PING[1:], id="no-method"),
        pytest.param([GET_PING[0], GET_PING[2]], id="no-scheme"),
        pytest.param(GET_PING[:2], id="no-path"),
        pytest.param([*GET_PING[:2], (":path", "")], id="empty-path"),
        pytest.param([*GET_PING, (":method", "GET")], id="duplicate-method"),
        pytest.param([*GET_PING, (":path", "/ping")], id="duplicate-path"),
        pytest.param([*GET_PING, (":foo", "bar")], id="unknown-pseudo-header"),
        pytest.param([*GET_PING, (":status", "200")], id="response-pseudo-header"),
        pytest.param([GET_PING[0], ("x-a", "1"), *GET_PING[1:]], id="pseudo-after-regular"),
    ],
)
def test_a_malformed_request_is_a_stream_protocol_error(
    client: H2Client, headers: list[tuple[str, str]]
) -> None:
    stream_id = client.new_stream()
    client.send_headers(stream_id, [*headers, ("host", client.authority)])
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)


def test_te_trailers_is_allowed(client: H2Client) -> None:
    stream_id = client.request("GET", "/ping", headers=[("te", "trailers")])
    assert client.response(stream_id).body == b"pong", client.exchange()


def test_a_body_shorter_than_content_length_is_malformed(client: H2Client) -> None:
    stream_id = client.new_stream()
    headers = client.request_headers("POST", "/echo", [("content-length", "10")])
    client.send_headers(stream_id, headers, end_stream=False)
    client.send(DataFrame(stream_id, b"abc", flags=["END_STREAM"]))
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)


def test_a_body_longer_than_content_length_is_malformed(client: H2Client) -> None:
    stream_id = client.new_stream()
    headers = client.request_headers("POST", "/echo", [("content-length", "2")])
    client.send_headers(stream_id, headers, end_stream=False)
    client.send(DataFrame(stream_id, b"abcdef", flags=["END_STREAM"]))
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)


def test_a_pseudo_header_in_trailers_is_malformed(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(DataFrame(stream_id, b"body"))
    client.send_headers(stream_id, [(":path", "/ping")])
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)


def test_a_body_ended_by_an_empty_data_frame_is_received_whole(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(DataFrame(stream_id, b"body"))
    client.send(DataFrame(stream_id, b"", flags=["END_STREAM"]))
    assert client.response(stream_id).body == b"body", client.exchange()


def test_trailers_without_end_stream_are_an_error_of_their_stream(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(DataFrame(stream_id, b"body"))
    client.send_headers(stream_id, [("x-checksum", "abc")], end_stream=False)
    client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)


def test_trailers_after_a_body_are_accepted(client: H2Client) -> None:
    stream_id = open_stream(client)
    client.send(DataFrame(stream_id, b"body"))
    client.send_headers(stream_id, [("x-checksum", "abc")])
    assert client.response(stream_id).body == b"body", client.exchange()


# -- limits: one abusive client must not hurt the server ------------------------------------


def refused_flood(client: H2Client, codes: tuple[int, ...], timeout: float = 15.0) -> None:
    """The server ended the connection with a GOAWAY carrying one of `codes`; a reset (the
    server closed with the flood still unread) may have swallowed that GOAWAY."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            received = client.next_frame(max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            client.fail("the server still has the connection open after the flood")
        if received is None:
            if not client.reset_seen:
                client.fail("the connection closed without a GOAWAY")
            return
        if received.kind == FrameType.GOAWAY:
            if received.error_code not in codes:
                client.fail(f"GOAWAY carries {ErrorCode(received.error_code).name}")
            client.expect_closed(max(deadline - time.monotonic(), 1.0))
            return


def flood(client: H2Client, what: str, frames: Iterator[bytes], batch: int = 500) -> None:
    """Write `frames` as fast as the server reads them, reading nothing; stop when the
    server closes, or stops reading for 10 seconds."""
    sent = 0
    client.sock.settimeout(10)
    while True:
        chunk = b"".join(next(frames, b"") for _ in range(batch))
        if not chunk:
            break
        try:
            client.sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError) as exc:
            client.note(f"the flood stopped: {exc!r}")
            break
        sent += len(chunk)
    client.note(f"flooded {sent} bytes of {what}")


def test_a_header_list_over_the_limit_is_refused(client: H2Client) -> None:
    limit = client.server_settings.get(Setting.MAX_HEADER_LIST_SIZE, 1 << 20)
    many = [(f"x-field-{i}", "v" * 1000) for i in range(2 * limit // 1000 + 1)]
    stream_id = client.new_stream()
    client.send_headers(stream_id, client.request_headers("GET", "/ping", many))
    answer = client.read_until(
        lambda r: (
            r.kind == FrameType.GOAWAY
            or (r.stream_id == stream_id and r.kind in (FrameType.RST_STREAM, FrameType.HEADERS))
        )
    )
    if answer.kind == FrameType.HEADERS:
        assert answer.status == 431, client.exchange()
    elif answer.kind == FrameType.RST_STREAM:
        assert answer.error_code != ErrorCode.NO_ERROR, client.exchange()
    else:
        assert answer.error_code in (*CALM_CODES, ErrorCode.COMPRESSION_ERROR), client.exchange()


def test_a_header_list_of_8_kib_is_answered(client: H2Client) -> None:
    fields = [(f"x-field-{i}", "v" * 1000) for i in range(8)]
    stream_id = client.request("GET", "/ping", headers=fields)
    assert client.response(stream_id).body == b"pong", client.exchange()


def test_an_endless_header_block_is_cut_off(client: H2Client) -> None:
    # CONTINUATION frames that never end the block: the server must not buffer them forever.
    literal = client.encoder.encode([("x-flood", "f" * 1000)], huffman=False)
    fragment = literal * (client.max_send_frame // len(literal))
    head = [frame(FrameType.HEADERS, END_STREAM, 1, client.encoder.encode(
        client.request_headers("GET", "/ping")))]  # fmt: skip
    rest = (frame(FrameType.CONTINUATION, 0, 1, fragment) for _ in range(2048))  # 32 MiB
    flood(client, "CONTINUATION", iter([*head, *rest]), batch=16)
    refused_flood(client, (*CALM_CODES, ErrorCode.COMPRESSION_ERROR))


def test_a_settings_flood_is_enhance_your_calm(client: H2Client) -> None:
    flood(client, "SETTINGS", (SettingsFrame(0).serialize() for _ in range(50_000)))
    refused_flood(client, (ErrorCode.ENHANCE_YOUR_CALM,))


def test_a_ping_flood_is_enhance_your_calm(client: H2Client) -> None:
    flood(client, "PING", (PingFrame(0, b"floodme!").serialize() for _ in range(50_000)))
    refused_flood(client, (ErrorCode.ENHANCE_YOUR_CALM,))


def test_rapid_reset_is_enhance_your_calm(client: H2Client) -> None:
    # Open a stream and cancel it at once, over and over: work for the server, none for us.
    def open_and_cancel() -> Iterator[bytes]:
        for stream_id in range(1, 40_000, 2):
            yield headers_frame(client, stream_id, flags=END_STREAM | END_HEADERS)
            yield frame(FrameType.RST_STREAM, 0, stream_id, ErrorCode.CANCEL.to_bytes(4, "big"))

    flood(client, "HEADERS + RST_STREAM", open_and_cancel())
    refused_flood(client, (ErrorCode.ENHANCE_YOUR_CALM,))


def test_an_error_on_one_connection_leaves_the_others_open(connect: Connect) -> None:
    bystander = connect()
    stream_id = open_stream(bystander)  # mid-request while its neighbour fails
    offender = connect()
    offender.send(frame(FrameType.DATA, 0, 0, b"stray"))
    offender.expect_connection_error(ErrorCode.PROTOCOL_ERROR)
    bystander.send(DataFrame(stream_id, b"still here", flags=["END_STREAM"]))
    assert bystander.response(stream_id).body == b"still here", bystander.exchange()


@pytest.mark.parametrize("path", ["/ping", "/large?size=1000"])
def test_responses_carry_lower_case_names_and_no_connection_headers(
    client: H2Client, path: str
) -> None:
    response = client.get(path)
    names = [name for name, _ in response.headers]
    assert all(name == name.lower() for name in names), names
    forbidden = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
    assert not forbidden & set(names), names
