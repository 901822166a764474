"""`Http2ServerConnection`: events from an h2 client's bytes, answers and limits as frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame

from socketify.protocol.http2 import (
    ENHANCE_YOUR_CALM,
    FLOOD_BUDGETS,
    NO_ERROR,
    PREFACE,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    BodyData,
    ConnectionTerminated,
    Http2Limits,
    Http2ServerConnection,
    PeerGoingAway,
    RequestOpened,
    StreamClosed,
    StreamEnded,
    StreamReset,
    WindowOpened,
)
from socketify.protocol.http11 import header_field

COMPRESSION_ERROR = int(ErrorCodes.COMPRESSION_ERROR)
FRAME_SIZE_ERROR = int(ErrorCodes.FRAME_SIZE_ERROR)
T = TypeVar("T")
GET = [(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", "/a?b=1")]


class Pair:
    """A server connection and an h2 client connection joined by byte hand-offs."""

    def __init__(
        self, limits: Http2Limits | None = None, client_settings: dict[int, int] | None = None
    ) -> None:
        self.server = Http2ServerConnection(limits)
        config = h2.config.H2Configuration(client_side=True, header_encoding="latin-1")
        self.client = h2.connection.H2Connection(config)
        self.client.initiate_connection()
        if client_settings:
            self.client.update_settings(client_settings)
        self.to_server()
        self.to_client()

    def to_server(self) -> list[object]:
        return list(self.server.receive_data(self.client.data_to_send()))

    def to_client(self) -> list[h2.events.Event]:
        return self.client.receive_data(self.server.data_to_send())

    def request(self, headers: list[tuple[str, str]] = GET, end: bool = True) -> int:
        sid = self.client.get_next_available_stream_id()
        self.client.send_headers(sid, headers, end_stream=end)
        return sid


def of(kind: type[T], events: Sequence[object]) -> list[T]:
    return [event for event in events if isinstance(event, kind)]


def test_request_head_from_pseudo_headers() -> None:
    pair = Pair()
    sid = pair.request(
        [*GET, ("cookie", "a=1"), ("cookie", "b=2"), ("expect", "100-continue")], end=False
    )
    (opened,) = of(RequestOpened, pair.to_server())
    head = opened.head
    assert (opened.stream_id, opened.ended) == (sid, False)
    assert (head.method, head.target, head.path) == ("GET", "/a?b=1", "/a")
    assert head.query_string == "b=1"
    assert head.version == "HTTP/2.0" and head.keep_alive and head.expect_continue
    assert head.names["host"] == "example.com"
    assert head.names["cookie"] == "a=1; b=2"


def test_host_header_without_authority_is_kept() -> None:
    pair = Pair()
    pair.request([(":method", "GET"), (":scheme", "https"), (":path", "/"), ("host", "other.test")])
    (opened,) = of(RequestOpened, pair.to_server())
    assert opened.head.names["host"] == "other.test"
    assert opened.ended


def test_body_data_then_end_with_trailers_and_window_update_on_consumed() -> None:
    pair = Pair()
    size = 200_000
    sid = pair.request([(":method", "POST"), *GET[1:], ("content-length", str(size))], end=False)
    for start in range(0, size, 16384):
        pair.client.send_data(sid, b"h" * min(16384, size - start))
    pair.client.send_headers(sid, [("x-sum", "1")], end_stream=True)
    events = pair.to_server()
    assert of(RequestOpened, events)[0].head.content_length == size
    body = of(BodyData, events)
    assert sum(len(e.data) for e in body) == size and body[0] == BodyData(sid, b"h" * 16384, 16384)
    assert of(StreamEnded, events) == [StreamEnded(sid, (("x-sum", "1"),))]
    assert not of(h2.events.WindowUpdated, pair.to_client())  # nothing read, nothing granted
    pair.server.consumed(sid, size)
    assert of(h2.events.WindowUpdated, pair.to_client())


def test_response_headers_drop_hop_by_hop_and_add_date_server_length() -> None:
    pair = Pair()
    sid = pair.request()
    pair.to_server()
    fields = (
        header_field("Content-Type", "text/plain"),
        header_field("Connection", "close"),
        header_field("Keep-Alive", "timeout=5"),
        header_field("Set-Cookie", "a=1"),
        header_field("Set-Cookie", "b=2"),
    )
    pair.server.start_response(sid, 200, fields, length=2)
    assert pair.server.send_data(sid, b"ok", end_stream=True) == 2
    events = pair.to_client()
    (response,) = of(h2.events.ResponseReceived, events)
    headers = response.headers
    names = [name for name, _ in headers]
    assert headers[0] == (":status", "200")
    assert "connection" not in names and "keep-alive" not in names
    assert ("content-length", "2") in headers and ("server", "socketify") in headers
    assert "date" in names and names.count("set-cookie") == 2
    assert of(h2.events.DataReceived, events)[0].data == b"ok"
    assert of(h2.events.StreamEnded, events)


def test_no_content_length_for_204_and_streams() -> None:
    pair = Pair()
    first, second = pair.request(), pair.request()
    pair.to_server()
    pair.server.start_response(first, 204, (), length=0, end_stream=True)
    pair.server.start_response(second, 200, (), length=None)
    responses = of(h2.events.ResponseReceived, pair.to_client())
    for response in responses:
        assert "content-length" not in dict(response.headers)


def test_send_data_stops_at_the_flow_control_window() -> None:
    pair = Pair(client_settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10})
    sid = pair.request()
    pair.to_server()
    pair.server.start_response(sid, 200, (), length=25)
    assert pair.server.send_data(sid, b"x" * 25, end_stream=True) == 10
    assert pair.server.window(sid) == 0
    events = pair.to_client()
    assert not of(h2.events.StreamEnded, events)
    pair.client.increment_flow_control_window(100, stream_id=sid)
    assert WindowOpened(sid) in pair.to_server()
    assert pair.server.send_data(sid, b"x" * 15, end_stream=True) == 15
    assert of(h2.events.StreamEnded, pair.to_client())


def test_large_body_is_split_into_frames_of_the_peer_size() -> None:
    pair = Pair()
    sid = pair.request()
    pair.to_server()
    pair.client.increment_flow_control_window(1 << 20)
    pair.client.increment_flow_control_window(1 << 20, stream_id=sid)
    pair.to_server()
    pair.server.start_response(sid, 200, (), length=50_000)
    assert pair.server.send_data(sid, b"y" * 50_000, end_stream=True) == 50_000
    data = of(h2.events.DataReceived, pair.to_client())
    assert sum(len(e.data) for e in data) == 50_000 and len(data) == 4


def test_informational_100_and_trailers() -> None:
    pair = Pair()
    sid = pair.request(end=False)
    pair.to_server()
    pair.server.informational_100(sid)
    pair.server.start_response(sid, 200, ())
    pair.server.send_data(sid, b"a")
    pair.server.send_trailers(sid, [("X-Check", "ok")])
    events = pair.to_client()
    assert of(h2.events.InformationalResponseReceived, events)[0].headers == [(":status", "100")]
    assert of(h2.events.TrailersReceived, events)[0].headers == [("x-check", "ok")]


def test_reset_by_client_is_reported_and_writes_then_fail() -> None:
    pair = Pair()
    sid = pair.request(end=False)
    pair.to_server()
    pair.client.reset_stream(sid, 8)
    assert pair.to_server() == [StreamReset(sid, 8, True)]
    with pytest.raises(StreamClosed):
        pair.server.start_response(sid, 200, ())


def test_streams_over_the_limit_are_refused() -> None:
    pair = Pair(Http2Limits(max_concurrent_streams=2))
    # A client that ignores the advertised limit (h2's own client would obey it).
    pair.client.remote_settings = h2.settings.Settings(client=False)
    ids = [pair.request() for _ in range(3)]
    opened = of(RequestOpened, pair.to_server())
    assert [event.stream_id for event in opened] == ids[:2]
    resets = of(h2.events.StreamReset, pair.to_client())
    assert [(e.stream_id, e.error_code) for e in resets] == [(ids[2], REFUSED_STREAM)]
    pair.server.finished(ids[0])
    later = pair.request()
    assert [event.stream_id for event in of(RequestOpened, pair.to_server())] == [later]


def test_settings_advertise_the_limits() -> None:
    pair = Pair(Http2Limits(max_concurrent_streams=7, max_header_list_size=4096))
    remote = pair.client.remote_settings
    assert remote.max_concurrent_streams == 7
    assert remote.max_header_list_size == 4096


def test_rapid_reset_ends_with_enhance_your_calm() -> None:
    pair = Pair(Http2Limits(max_resets_per_second=5))
    events: list[object] = []
    for _ in range(10):
        sid = pair.request(end=False)
        pair.client.reset_stream(sid)
        events += pair.to_server()
    (end,) = of(ConnectionTerminated, events)
    assert (end.error_code, end.by_peer) == (ENHANCE_YOUR_CALM, False)
    goaway = of(h2.events.ConnectionTerminated, pair.to_client())
    assert goaway[0].error_code == ENHANCE_YOUR_CALM


def test_a_stream_refused_and_reset_in_one_read_is_counted_not_raised() -> None:
    pair = Pair(Http2Limits(max_concurrent_streams=1, max_resets_per_second=3))
    pair.client.remote_settings = h2.settings.Settings(client=False)
    pair.request(end=False)
    events: list[object] = []
    for _ in range(5):
        sid = pair.request(end=False)
        pair.client.reset_stream(sid)
    events += pair.to_server()  # each HEADERS and its RST_STREAM arrive together
    assert [e.error_code for e in of(ConnectionTerminated, events)] == [ENHANCE_YOUR_CALM]


def test_streams_opened_past_the_limit_again_and_again_end_with_enhance_your_calm() -> None:
    # A client that ignores MAX_CONCURRENT_STREAMS costs a header block and a RST_STREAM per
    # stream and is never served: its refusals have a budget.
    pair = Pair(Http2Limits(max_concurrent_streams=1, max_refused_per_second=5))
    pair.client.remote_settings = h2.settings.Settings(client=False)
    pair.request(end=False)  # the one stream it may have open
    events: list[object] = []
    for _ in range(5):
        pair.request(end=False)
        events += pair.to_server()
    assert not of(ConnectionTerminated, events)  # five refusals: within the budget
    refused = of(h2.events.StreamReset, pair.to_client())
    assert [e.error_code for e in refused] == [ErrorCodes.REFUSED_STREAM] * 5
    pair.request(end=False)
    (end,) = of(ConnectionTerminated, pair.to_server())
    assert (end.error_code, end.by_peer) == (ENHANCE_YOUR_CALM, False)
    assert "refused" in end.detail


@pytest.mark.parametrize("frame", [PingFrame(0, opaque_data=b"12345678"), SettingsFrame(0)])
def test_control_frame_flood_ends_with_enhance_your_calm(frame: object) -> None:
    pair = Pair(Http2Limits(max_pings_per_second=20, max_settings_per_second=20))
    flood = frame.serialize() * 50  # type: ignore[attr-defined]
    (end,) = of(ConnectionTerminated, list(pair.server.receive_data(flood)))
    assert end.error_code == ENHANCE_YOUR_CALM and not end.by_peer
    assert pair.server.receive_data(flood) == []


def _raw_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    head = len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big")
    return head + payload


# Frames that carry nothing, each with the Http2Limits field that budgets it.
NOTHING_FRAMES = {
    "PRIORITY flood": (_raw_frame(0x2, 0, 3, bytes(4) + b"\x10"), "max_priority_per_second"),
    "WINDOW_UPDATE flood": (
        _raw_frame(0x8, 0, 0, (1).to_bytes(4, "big")),
        "max_window_updates_per_second",
    ),
    "unknown frame flood": (_raw_frame(0xFA, 0, 0, b"flooding"), "max_unknown_frames_per_second"),
    "empty DATA flood": (_raw_frame(0x0, 0, 1), "max_empty_data_per_second"),
}


@pytest.mark.parametrize("flood", list(NOTHING_FRAMES))
def test_a_flood_of_frames_that_carry_nothing_ends_with_enhance_your_calm(flood: str) -> None:
    frame, budget = NOTHING_FRAMES[flood]
    pair = Pair(Http2Limits(**{budget: 20}))
    pair.request(end=False)  # stream 1 stays open: the empty DATA frames go to it
    pair.to_server()
    (end,) = of(ConnectionTerminated, list(pair.server.receive_data(frame * 21)))
    assert (end.error_code, end.by_peer, end.detail) == (ENHANCE_YOUR_CALM, False, flood)
    goaway = of(h2.events.ConnectionTerminated, pair.to_client())
    assert goaway[0].error_code == ENHANCE_YOUR_CALM


@pytest.mark.parametrize("flood", list(NOTHING_FRAMES))
def test_frames_that_carry_nothing_within_their_budget_are_taken(flood: str) -> None:
    frame, budget = NOTHING_FRAMES[flood]
    pair = Pair(Http2Limits(**{budget: 20}))
    pair.request(end=False)
    pair.to_server()
    events = pair.server.receive_data(frame * 20)
    assert not of(ConnectionTerminated, events) and not pair.server.closed


def test_ping_acknowledgements_are_not_counted_as_a_ping_flood() -> None:
    pair = Pair(Http2Limits(max_pings_per_second=20))
    acks = PingFrame(0, opaque_data=b"12345678", flags=["ACK"]).serialize() * 50
    assert not of(ConnectionTerminated, pair.server.receive_data(acks))
    assert not pair.server.closed


def test_every_flood_named_in_the_budget_table_has_its_limit() -> None:
    assert set(NOTHING_FRAMES) <= set(FLOOD_BUDGETS)
    assert all(hasattr(Http2Limits(), field) for field in FLOOD_BUDGETS.values())


def test_window_updates_answering_our_data_frames_are_not_a_flood() -> None:
    pair = Pair(Http2Limits(max_window_updates_per_second=10))
    sid = pair.request()
    pair.to_server()
    pair.server.start_response(sid, 200, [])
    sent = 0
    for _ in range(40):  # 40 DATA frames, each acknowledged on the stream and the connection
        sent += pair.server.send_data(sid, b"x" * 1000)
        for event in pair.to_client():
            if isinstance(event, h2.events.DataReceived):
                length = event.flow_controlled_length
                pair.client.increment_flow_control_window(length, stream_id=sid)
                pair.client.increment_flow_control_window(length)
        assert not of(ConnectionTerminated, pair.to_server())
    assert sent == 40_000 and not pair.server.closed


def test_oversized_header_list_ends_the_connection() -> None:
    pair = Pair(Http2Limits(max_header_list_size=1024))
    pair.request([*GET, ("x-big", "v" * 4000)])
    (end,) = of(ConnectionTerminated, pair.to_server())
    assert not end.by_peer and end.error_code != NO_ERROR


def test_continuation_flood_is_bounded_in_bytes() -> None:
    limits = Http2Limits(max_header_list_size=1024)
    pair = Pair(limits)
    raw = HeadersFrame(1, data=b"\x82", flags=()).serialize()
    raw += b"".join(
        ContinuationFrame(1, data=b"\x00" * 1000, flags=()).serialize() for _ in range(30)
    )
    (end,) = of(ConnectionTerminated, pair.server.receive_data(raw))
    assert end.error_code == ENHANCE_YOUR_CALM
    assert "header block" in end.detail


def test_continuation_flood_fed_byte_by_byte_is_caught_too() -> None:
    pair = Pair(Http2Limits(max_header_list_size=1024))
    raw = HeadersFrame(1, data=b"\x82", flags=()).serialize()
    raw += ContinuationFrame(1, data=b"\x00" * 10000, flags=()).serialize() * 2
    ends = []
    for i in range(len(raw)):
        ends += of(ConnectionTerminated, pair.server.receive_data(raw[i : i + 1]))
    assert [end.error_code for end in ends] == [ENHANCE_YOUR_CALM]


def test_oversized_frame_is_a_frame_size_error() -> None:
    pair = Pair()
    raw = PingFrame(0, opaque_data=b"12345678").serialize()
    big = (20000).to_bytes(3, "big") + b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00" * 20000
    (end,) = of(ConnectionTerminated, pair.server.receive_data(raw + big))
    assert end.error_code == 6  # FRAME_SIZE_ERROR


def test_garbage_is_a_protocol_error_not_an_exception() -> None:
    server = Http2ServerConnection()
    server.data_to_send()
    (end,) = server.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\x00" * 30)
    assert isinstance(end, ConnectionTerminated) and not end.by_peer
    assert server.data_to_send()  # the GOAWAY


def test_graceful_goaway_serves_open_streams_and_refuses_newer() -> None:
    pair = Pair()
    sid = pair.request()
    pair.to_server()
    pair.server.goaway()
    goaway = of(h2.events.ConnectionTerminated, pair.to_client())
    assert goaway[0].last_stream_id == sid and goaway[0].error_code == NO_ERROR
    pair.server.start_response(sid, 200, (), length=2)
    pair.server.send_data(sid, b"ok", end_stream=True)
    pair.server.close()
    data = pair.server.data_to_send()
    assert b"ok" in data


def test_refused_after_goaway() -> None:
    pair = Pair()
    pair.request()
    pair.to_server()
    pair.server.goaway()
    server_bytes = pair.server.data_to_send()
    assert server_bytes
    late = HeadersFrame(3, data=b"\x82\x87\x84\x41\x01x", flags=("END_HEADERS", "END_STREAM"))
    events = pair.server.receive_data(late.serialize())
    assert not of(RequestOpened, events)


def test_a_path_that_is_not_absolute_resets_the_stream() -> None:
    pair = Pair()
    sid = pair.request([*GET[:3], (":path", "abc")])
    assert not of(RequestOpened, pair.to_server())
    resets = of(h2.events.StreamReset, pair.to_client())
    assert resets[0].stream_id == sid


def test_finished_before_the_body_ended_resets_with_no_error() -> None:
    pair = Pair()
    sid = pair.request(end=False)
    pair.to_server()
    pair.server.start_response(sid, 413, (), length=0, end_stream=True)
    pair.server.finished(sid)
    resets = of(h2.events.StreamReset, pair.to_client())
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, NO_ERROR)]
    assert pair.server.open_streams == 0


def test_peer_goaway_is_reported_and_open_streams_are_still_answered() -> None:
    pair = Pair()
    sid = pair.request()
    pair.to_server()
    pair.client.close_connection()
    assert pair.to_server() == [PeerGoingAway()]
    assert not pair.server.closed
    pair.server.start_response(sid, 200, (), length=2)
    pair.server.send_data(sid, b"ok", end_stream=True)
    assert b"ok" in pair.server.data_to_send()


def test_peer_goaway_fed_byte_by_byte_is_still_hidden_from_h2() -> None:
    pair = Pair()
    sid = pair.request()
    pair.to_server()
    pair.client.close_connection()
    events = [
        e for byte in pair.client.data_to_send() for e in pair.server.receive_data(bytes([byte]))
    ]
    assert events == [PeerGoingAway()]
    pair.server.start_response(sid, 204, (), end_stream=True)
    assert pair.server.data_to_send()


def test_a_frame_header_over_max_frame_size_is_refused_before_its_payload() -> None:
    pair = Pair()
    header = (20000).to_bytes(3, "big") + b"\x06\x00" + bytes(4)  # a PING's header only
    (end,) = of(ConnectionTerminated, pair.server.receive_data(header))
    assert end.error_code == FRAME_SIZE_ERROR


def test_a_settings_ack_with_a_payload_is_a_frame_size_error() -> None:
    pair = Pair()
    ack = SettingsFrame(0, settings={4: 100}).serialize()
    ack = ack[:4] + b"\x01" + ack[5:]  # the ACK flag, with the payload kept
    (end,) = of(ConnectionTerminated, pair.server.receive_data(ack))
    assert end.error_code == FRAME_SIZE_ERROR


def test_a_preface_not_followed_by_settings_is_a_protocol_error() -> None:
    server = Http2ServerConnection()
    server.data_to_send()
    ping = PingFrame(0, opaque_data=b"12345678").serialize()
    (end,) = of(ConnectionTerminated, server.receive_data(PREFACE + ping))
    assert end.error_code == PROTOCOL_ERROR
    assert server.data_to_send()  # the GOAWAY


# -- malformed requests reset their stream; the connection serves on -------------------------


def lenient_pair() -> Pair:
    """A pair whose client sends header lists as given, malformed ones too."""
    pair = Pair()
    pair.client.config.validate_outbound_headers = False
    pair.client.config.normalize_outbound_headers = False
    return pair


def assert_stream_reset(pair: Pair, sid: int) -> None:
    client_events = pair.to_client()
    resets = of(h2.events.StreamReset, client_events)
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, PROTOCOL_ERROR)]
    assert not of(h2.events.ConnectionTerminated, client_events)
    again = pair.request()
    assert of(RequestOpened, pair.to_server())[0].stream_id == again


PLAIN = [(":method", "GET"), (":scheme", "https"), (":path", "/")]


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param([*PLAIN, ("X-Upper", "1")], id="uppercase-name"),
        pytest.param([*PLAIN, ("x bad", "1")], id="space-in-name"),
        pytest.param([*PLAIN, ("x:bad", "1")], id="colon-in-name"),
        pytest.param([*PLAIN, ("", "1")], id="empty-name"),
        pytest.param([*PLAIN, ("x-bad", "a\r\nb")], id="crlf-in-value"),
        pytest.param([*PLAIN, ("x-bad", "a\x00b")], id="nul-in-value"),
        pytest.param([*PLAIN, ("x-bad", " a")], id="leading-space-in-value"),
        pytest.param([*PLAIN, ("x-bad", "a\t")], id="trailing-tab-in-value"),
        pytest.param([*PLAIN, ("connection", "close")], id="connection"),
        pytest.param([*PLAIN, ("keep-alive", "timeout=5")], id="keep-alive"),
        pytest.param([*PLAIN, ("proxy-connection", "close")], id="proxy-connection"),
        pytest.param([*PLAIN, ("transfer-encoding", "chunked")], id="transfer-encoding"),
        pytest.param([*PLAIN, ("upgrade", "h2c")], id="upgrade"),
        pytest.param([*PLAIN, ("te", "gzip")], id="te-not-trailers"),
        pytest.param(PLAIN[1:], id="no-method"),
        pytest.param([PLAIN[0], PLAIN[2]], id="no-scheme"),
        pytest.param(PLAIN[:2], id="no-path"),
        pytest.param([*PLAIN[:2], (":path", "")], id="empty-path"),
        pytest.param([*PLAIN, (":method", "GET")], id="duplicate-method"),
        pytest.param([*PLAIN, (":scheme", "http")], id="duplicate-scheme"),
        pytest.param([*PLAIN, (":path", "/")], id="duplicate-path"),
        pytest.param([*PLAIN, (":authority", "a"), (":authority", "b")], id="two-authorities"),
        pytest.param([*PLAIN, (":authority", "a b")], id="authority-with-space"),
        pytest.param([*PLAIN, (":authority", "evil.com/x?@a")], id="authority-with-path"),
        pytest.param([*PLAIN, (":authority", "user@example.com")], id="authority-userinfo"),
        pytest.param([*PLAIN, (":authority", "[::1")], id="authority-open-bracket"),
        pytest.param([*PLAIN, ("host", "a b")], id="host-with-space"),
        pytest.param([*PLAIN, ("x-bad", "a\x01b")], id="control-byte-in-value"),
        pytest.param([*PLAIN, ("x-bad", "a\x1bb")], id="escape-in-value"),
        pytest.param([*PLAIN, ("x-bad", "a\x7fb")], id="del-in-value"),
        pytest.param([*PLAIN, (":foo", "bar")], id="unknown-pseudo-header"),
        pytest.param([*PLAIN, (":status", "200")], id="response-pseudo-header"),
        pytest.param([PLAIN[0], ("x-a", "1"), *PLAIN[1:]], id="pseudo-after-regular"),
        pytest.param([*PLAIN, ("content-length", "1x")], id="content-length-not-digits"),
        pytest.param(
            [*PLAIN, ("content-length", "1"), ("content-length", "2")],
            id="conflicting-content-lengths",
        ),
        pytest.param([*PLAIN, ("Content-Length", "0")], id="uppercase-content-length"),
    ],
)
def test_a_malformed_request_resets_only_its_stream(headers: list[tuple[str, str]]) -> None:
    pair = lenient_pair()
    sid = pair.request(headers, end=False)
    assert not of(RequestOpened, pair.to_server())
    assert_stream_reset(pair, sid)


def test_te_trailers_and_repeated_equal_content_lengths_are_accepted() -> None:
    pair = lenient_pair()
    pair.request([*PLAIN, ("te", "trailers"), ("content-length", "0"), ("content-length", "0")])
    (opened,) = of(RequestOpened, pair.to_server())
    assert opened.head.content_length == 0
    assert opened.head.names["te"] == "trailers"


def test_a_content_length_with_no_body_resets_the_stream() -> None:
    pair = lenient_pair()
    sid = pair.request([*PLAIN, ("content-length", "3")])
    assert not of(RequestOpened, pair.to_server())
    assert_stream_reset(pair, sid)


@pytest.mark.parametrize("body", [b"ab", b"abcd"], ids=["shorter", "longer"])
def test_a_body_that_does_not_match_its_content_length_resets_the_stream(body: bytes) -> None:
    pair = lenient_pair()
    sid = pair.request([*PLAIN, ("content-length", "3")], end=False)
    (opened,) = of(RequestOpened, pair.to_server())
    assert opened.head.names["content-length"] == "3"
    pair.client.send_data(sid, body, end_stream=True)
    events = pair.to_server()
    assert not of(StreamEnded, events)
    (reset,) = of(StreamReset, events)
    assert (reset.stream_id, reset.error_code, reset.by_peer) == (sid, PROTOCOL_ERROR, False)
    pair.server.finished(sid)
    assert_stream_reset(pair, sid)


def test_a_body_that_matches_its_content_length_in_pieces_is_received() -> None:
    pair = lenient_pair()
    sid = pair.request([*PLAIN, ("content-length", "4")], end=False)
    pair.to_server()
    pair.client.send_data(sid, b"ab")
    pair.client.send_data(sid, b"cd", end_stream=True)
    events = pair.to_server()
    assert b"".join(e.data for e in of(BodyData, events)) == b"abcd"
    assert of(StreamEnded, events)


@pytest.mark.parametrize(
    "trailers",
    [[(":path", "/")], [("X-Upper", "1")], [("connection", "close")]],
    ids=["pseudo-header", "uppercase-name", "connection-specific"],
)
def test_malformed_trailers_reset_the_stream(trailers: list[tuple[str, str]]) -> None:
    pair = lenient_pair()
    sid = pair.request(PLAIN, end=False)
    pair.to_server()
    pair.client.send_data(sid, b"body")
    pair.client.send_headers(sid, trailers, end_stream=True)
    events = pair.to_server()
    assert not of(StreamEnded, events)
    assert [e.stream_id for e in of(StreamReset, events)] == [sid]
    pair.server.finished(sid)
    assert_stream_reset(pair, sid)


def test_trailers_no_trailer_may_carry_are_dropped_the_rest_kept() -> None:
    pair = lenient_pair()
    sid = pair.request(PLAIN, end=False)
    pair.to_server()
    pair.client.send_data(sid, b"body")
    sent = [("x-sum", "1"), ("content-type", "text/evil"), ("host", "evil"), ("x-sum", "2")]
    pair.client.send_headers(sid, sent, end_stream=True)
    (ended,) = of(StreamEnded, pair.to_server())
    assert ended.trailers == (("x-sum", "1"), ("x-sum", "2"))


@pytest.mark.parametrize("data_first", [True, False], ids=["after-data", "no-data"])
def test_trailers_without_end_stream_reset_only_their_stream(data_first: bool) -> None:
    pair = lenient_pair()
    sid = pair.request(PLAIN, end=False)
    pair.to_server()
    if data_first:
        pair.client.send_data(sid, b"body")
    block = pair.client.encoder.encode([("x-sum", "1")])
    raw = HeadersFrame(sid, data=block, flags=["END_HEADERS"]).serialize()
    events = pair.server.receive_data(pair.client.data_to_send() + raw)
    assert not of(StreamEnded, events) and not of(ConnectionTerminated, events)
    assert of(StreamReset, events) == [StreamReset(sid, PROTOCOL_ERROR, by_peer=False)]
    pair.server.finished(sid)
    assert_stream_reset(pair, sid)


def test_trailers_without_end_stream_split_across_reads_reset_their_stream() -> None:
    pair = lenient_pair()
    sid = pair.request(PLAIN, end=False)
    pair.to_server()
    block = pair.client.encoder.encode([("x-sum", "1")])
    raw = HeadersFrame(sid, data=block, flags=["END_HEADERS"]).serialize()
    events = []
    for index in range(len(raw)):
        events += pair.server.receive_data(raw[index : index + 1])
    assert of(StreamReset, events) == [StreamReset(sid, PROTOCOL_ERROR, by_peer=False)]
    assert not of(ConnectionTerminated, events)


def test_an_undecodable_header_block_is_a_compression_error() -> None:
    pair = Pair()
    block = HeadersFrame(1, data=b"\x80", flags=("END_HEADERS", "END_STREAM"))
    (end,) = of(ConnectionTerminated, pair.server.receive_data(block.serialize()))
    assert (end.error_code, end.by_peer) == (COMPRESSION_ERROR, False)
    goaway = of(h2.events.ConnectionTerminated, pair.to_client())
    assert goaway[0].error_code == COMPRESSION_ERROR


def test_a_window_made_negative_by_settings_sends_nothing_until_it_opens() -> None:
    pair = Pair()
    sid = pair.request()
    pair.to_server()
    pair.client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10})
    pair.to_server()
    pair.server.start_response(sid, 200, (), length=30)
    assert pair.server.send_data(sid, b"a" * 10) == 10
    pair.client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    pair.to_server()
    assert pair.server.window(sid) == -10
    assert pair.server.send_data(sid, b"b" * 20, end_stream=True) == 0
    pair.client.increment_flow_control_window(30, stream_id=sid)
    pair.to_server()
    assert pair.server.send_data(sid, b"b" * 20, end_stream=True) == 20
    data = of(h2.events.DataReceived, pair.to_client())
    assert b"".join(event.data for event in data) == b"a" * 10 + b"b" * 20


def test_streams_left_draining_are_bounded_by_the_stream_limit() -> None:
    pair = Pair(Http2Limits(max_concurrent_streams=2))
    pair.client.remote_settings = h2.settings.Settings(client=False)  # the client keeps no count
    reset = []
    for _ in range(6):
        sid = pair.request([(":method", "POST"), *GET[1:], ("content-length", "10")], end=False)
        pair.to_server()
        pair.server.start_response(sid, 200, (), length=0, end_stream=True)
        pair.server.finished(sid, drain=True)  # the client never sends the rest
        reset += [e.stream_id for e in of(h2.events.StreamReset, pair.to_client())]
    assert len(reset) >= 3  # past the limit, the rest is refused, not waited for


def test_a_repeated_request_gets_the_same_immutable_head() -> None:
    pair = Pair()
    heads = []
    for _ in range(3):
        pair.request()
        (opened,) = of(RequestOpened, pair.to_server())
        heads.append(opened.head)
    assert heads[1] is heads[2] and heads[0].target == heads[2].target == "/a?b=1"
    pair.request([*GET, ("x-other", "1")])
    (other,) = of(RequestOpened, pair.to_server())
    assert other.head is not heads[2] and other.head.names["x-other"] == "1"
