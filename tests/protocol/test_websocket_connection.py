"""The server connection: every RFC 6455 rule, fed whole, byte by byte and split at random."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socketify.protocol.websocket import (
    CLOSED,
    NEED_DATA,
    TRANSITIONS,
    BinaryFragment,
    BinaryMessage,
    Close,
    Connection,
    DeflateParams,
    LocalProtocolError,
    Opcode,
    Ping,
    Pong,
    State,
    TextFragment,
    TextMessage,
    Trigger,
    unmask,
)

MASK = bytes.fromhex("37fa213d")
SPLITS = [None, 1, 3]
DEFLATE = DeflateParams(False, False, 15, 15, "permessage-deflate")


def frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bytes | None = MASK,
    length: int | None = None,
    form: int | None = None,
) -> bytes:
    """A client frame; `form` forces a length encoding (126/127), `length` lies about it."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | rsv | opcode
    bit = 0x80 if mask is not None else 0
    if form is None:
        form = n if n < 126 else 126 if n < 0x10000 else 127
    if form == 126:
        head = bytes((b0, bit | 126)) + n.to_bytes(2, "big")
    elif form == 127:
        head = bytes((b0, bit | 127)) + n.to_bytes(8, "big")
    else:
        head = bytes((b0, bit | n))
    if mask is None:
        return head + payload
    return head + mask + unmask(payload, mask)


def text(s: str | bytes, **kw: object) -> bytes:
    return frame(Opcode.TEXT, s.encode() if isinstance(s, str) else s, **kw)  # type: ignore[arg-type]


def close_frame(code: int | None = 1000, reason: bytes = b"") -> bytes:
    payload = b"" if code is None else code.to_bytes(2, "big") + reason
    return frame(Opcode.CLOSE, payload)


def drain(conn: Connection) -> list:
    events = []
    while (event := conn.next_event()) is not NEED_DATA and event is not CLOSED:
        events.append(event)
    return events


def run(
    data: bytes, *, split: int | None = None, eof: bool = False, conn: Connection | None = None
) -> tuple[list, bytes]:
    """Events and auto-replies for `data`, fed whole or in pieces of `split` bytes."""
    conn = conn or Connection()
    pieces = [data] if split is None else [data[i : i + split] for i in range(0, len(data), split)]
    events: list = []
    for piece in pieces:
        conn.feed(piece)
        events.extend(drain(conn))
    if eof:
        conn.feed(b"")
        events.extend(drain(conn))
    return events, conn.data_to_send()


def failure(data: bytes, *, split: int | None = None, **options: object) -> tuple[Close, bytes]:
    """The Close event and the close frame we sent for input we must refuse."""
    events, sent = run(data, split=split, conn=Connection(**options))  # type: ignore[arg-type]
    assert isinstance(events[-1], Close), events
    return events[-1], sent


def sent_close(code: int | None, reason: str = "") -> bytes:
    payload = b"" if code is None else code.to_bytes(2, "big") + reason.encode()
    return bytes((0x88, len(payload))) + payload


# -- framing rules → 1002 ----------------------------------------------------------------------

PROTOCOL_ERRORS = {
    "unmasked client frame": text("hi", mask=None),
    "RSV1 without an extension": text("hi", rsv=0x40),
    "RSV2": text("hi", rsv=0x20),
    "RSV3": text("hi", rsv=0x10),
    **{f"reserved opcode {op:#x}": frame(op, b"x") for op in (3, 4, 5, 6, 7, 0xB, 0xC, 0xF)},
    "ping over 125 bytes": frame(Opcode.PING, b"x" * 126),
    "close over 125 bytes": frame(Opcode.CLOSE, b"\x03\xe8" + b"x" * 124),
    "fragmented ping": frame(Opcode.PING, b"x", fin=False),
    "fragmented close": frame(Opcode.CLOSE, b"\x03\xe8", fin=False),
    "continuation without a message": frame(Opcode.CONTINUATION, b"x"),
    "text inside a fragmented message": text("a", fin=False) + text("b"),
    "binary inside a fragmented message": text("a", fin=False) + frame(Opcode.BINARY, b"b"),
    "16-bit length for a short frame": text("hi", form=126),
    "64-bit length for a short frame": text("hi", form=127),
    "64-bit length with the top bit set": frame(Opcode.BINARY, b"", length=1 << 63),
    "close payload of one byte": frame(Opcode.CLOSE, b"\x03"),
}


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", PROTOCOL_ERRORS)
def test_protocol_errors_close_with_1002(name: str, split: int | None) -> None:
    closing, sent = failure(PROTOCOL_ERRORS[name], split=split)
    assert closing.code == 1002 and not closing.clean
    assert sent == sent_close(1002, closing.reason)


def test_rsv1_on_a_continuation_or_control_frame_is_an_error_even_with_deflate() -> None:
    for data in (
        frame(Opcode.BINARY, b"", fin=False) + frame(Opcode.CONTINUATION, b"", rsv=0x40),
        frame(Opcode.PING, b"", rsv=0x40),
    ):
        assert failure(data, deflate=DEFLATE)[0].code == 1002


@pytest.mark.parametrize(
    "head", [text("x" * 1000, mask=None)[:4], bytes((0x83, 0x80)), text("x", rsv=0x20)[:2]]
)
def test_a_bad_header_fails_before_its_payload_arrives(head: bytes) -> None:
    conn = Connection()
    conn.feed(head)
    assert drain(conn)[0].code == 1002


def test_nothing_is_read_after_a_failure() -> None:
    conn = Connection()
    conn.feed(text("hi", mask=None) + text("more"))
    assert [type(e) for e in drain(conn)] == [Close]
    conn.feed(text("later"))
    assert conn.next_event() is CLOSED
    assert conn.state is State.CLOSED


# -- messages and fragmentation ----------------------------------------------------------------


@pytest.mark.parametrize("split", SPLITS)
def test_control_frames_may_interleave_a_fragmented_message(split: int | None) -> None:
    data = (
        text("Hel", fin=False)
        + frame(Opcode.PING, b"p")
        + frame(Opcode.CONTINUATION, b"l", fin=False)
        + frame(Opcode.PONG, b"q")
        + frame(Opcode.CONTINUATION, b"o")
    )
    events, sent = run(data, split=split)
    assert events == [Ping(b"p"), Pong(b"q"), TextMessage("Hello")]
    assert sent == b"\x8a\x01p"


@pytest.mark.parametrize("split", SPLITS)
def test_empty_messages_and_empty_fragments(split: int | None) -> None:
    data = text("") + frame(Opcode.BINARY, b"", fin=False) + frame(Opcode.CONTINUATION, b"")
    data += text("", fin=False) + frame(Opcode.CONTINUATION, b"", fin=False)
    data += frame(Opcode.CONTINUATION, b"!")
    events, _ = run(data, split=split)
    assert events == [TextMessage(""), BinaryMessage(b""), TextMessage("!")]


def test_fragments_mode_reports_each_frame() -> None:
    euro = "€".encode()  # split inside the character: the first fragment decodes to ""
    data = text(b"a" + euro[:1], fin=False) + frame(Opcode.CONTINUATION, euro[1:])
    data += frame(Opcode.BINARY, b"x", fin=False) + frame(Opcode.CONTINUATION, b"y")
    events, _ = run(data, conn=Connection(fragments=True))
    assert events == [
        TextFragment("a", True, False),
        TextFragment("€", False, True),
        BinaryFragment(b"x", True, False),
        BinaryFragment(b"y", False, True),
    ]


# -- UTF-8 → 1007 ------------------------------------------------------------------------------

INVALID_UTF8 = {
    "lone continuation byte": b"\x80",
    "overlong slash": b"\xc0\xaf",
    "surrogate": b"\xed\xa0\x80",
    "above U+10FFFF": b"\xf4\x90\x80\x80",
    "truncated at the end": b"ok\xe2\x82",
    "0xff": b"\xff",
}


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", INVALID_UTF8)
def test_invalid_utf8_closes_with_1007(name: str, split: int | None) -> None:
    bad = INVALID_UTF8[name]
    for data in (text(bad), text(bad + b"x" * 200), text(bad, fin=False) + frame(0, b"")):
        closing, sent = failure(data, split=split)
        assert closing.code == 1007
        assert sent == sent_close(1007, closing.reason)


@pytest.mark.parametrize("split", SPLITS)
def test_utf8_is_validated_across_fragments(split: int | None) -> None:
    euro = "€".encode()
    data = text(euro[:1], fin=False) + frame(0, euro[1:2], fin=False) + frame(0, euro[2:])
    assert run(data, split=split)[0] == [TextMessage("€")]


def test_invalid_utf8_fails_at_the_first_bad_fragment() -> None:
    conn = Connection()
    conn.feed(text(b"fine", fin=False) + frame(0, b"\xce\xba\xed\xa0\x80", fin=False))
    assert drain(conn)[0].code == 1007  # the message is not finished


def test_invalid_utf8_fails_fast_inside_one_frame() -> None:
    data = text(b"\xce\xba\xe1\xbd\xb9\xed\xa0\x80" + b"x" * 5000)
    conn = Connection()
    conn.feed(data[:20])  # the frame is far from complete
    assert drain(conn)[0].code == 1007


# -- close frames ------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000])
def test_invalid_close_codes_close_with_1002(code: int) -> None:
    closing, sent = failure(close_frame(code))
    assert closing.code == 1002
    assert sent == sent_close(1002, closing.reason)


@pytest.mark.parametrize("code", [1000, 1001, 1002, 1003, 1007, 1011, 1012, 1014, 3000, 4999])
def test_peer_close_is_echoed_and_reported_with_its_code(code: int) -> None:
    events, sent = run(close_frame(code, "bye ✓".encode()))
    assert events == [Close(code, "bye ✓", clean=True)]
    assert sent == sent_close(code)


def test_empty_peer_close_is_answered_empty_and_reported_as_1005() -> None:
    events, sent = run(close_frame(None))
    assert events == [Close(1005, "", clean=True)]
    assert sent == b"\x88\x00"  # 1005 never goes on the wire


def test_close_reason_must_be_utf8() -> None:
    closing, sent = failure(close_frame(1000, b"\xff"))
    assert closing.code == 1007 and sent == sent_close(1007, closing.reason)


def test_after_the_peer_closes_input_is_ignored_and_sends_are_refused() -> None:
    conn = Connection()
    events, _ = run(close_frame(1001) + text("late"), conn=conn)
    assert events == [Close(1001, "")]
    assert conn.state is State.CLOSED
    assert conn.next_event() is CLOSED
    for send in (
        lambda: conn.send_text("x"),
        lambda: conn.send_binary(b"x"),
        lambda: conn.ping(),
        lambda: conn.pong(),
        lambda: conn.close(),
        lambda: conn.send_raw(b"\x81\x00"),
    ):
        with pytest.raises(LocalProtocolError, match="closed"):
            send()


# -- server-initiated close --------------------------------------------------------------------


def test_server_close_waits_for_the_peer_and_reports_our_code() -> None:
    conn = Connection()
    assert conn.close(4001, "shutting down") == sent_close(4001, "shutting down")
    assert conn.state is State.CLOSE_SENT
    with pytest.raises(LocalProtocolError, match="sent a close"):
        conn.send_text("no more data")
    events, sent = run(text("in flight") + close_frame(1000), conn=conn)
    assert events == [TextMessage("in flight"), Close(4001, "shutting down", clean=True)]
    assert sent == b""  # no second close frame
    assert conn.state is State.CLOSED


def test_server_close_without_a_code_reports_1005() -> None:
    conn = Connection()
    assert conn.close(None) == b"\x88\x00"
    assert run(close_frame(None), conn=conn)[0] == [Close(1005, "", clean=True)]


def test_server_close_then_eof_or_timeout_reports_our_code_unclean() -> None:
    conn = Connection()
    conn.close(1001)
    assert run(b"", eof=True, conn=conn)[0] == [Close(1001, "", clean=False)]


def test_error_after_our_close_sends_nothing_more_and_reports_our_code() -> None:
    conn = Connection()
    conn.close(1000)
    events, sent = run(text("hi", mask=None), conn=conn)
    assert events == [Close(1000, "", clean=False)]
    assert sent == b""


def test_no_auto_pong_once_our_close_is_out() -> None:
    conn = Connection()
    conn.close()
    assert run(frame(Opcode.PING, b"x"), conn=conn) == ([Ping(b"x")], b"")


@pytest.mark.parametrize("code", [999, 1004, 1005, 1006, 1015, 2000, 5000])
def test_close_refuses_codes_that_may_not_be_sent(code: int) -> None:
    conn = Connection()
    with pytest.raises(ValueError):
        conn.close(code)
    assert conn.state is State.OPEN


def test_close_twice_is_a_local_error() -> None:
    conn = Connection()
    conn.close()
    with pytest.raises(LocalProtocolError):
        conn.close()


# -- end of input ------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", text("complete"), text("x" * 300)[:100], b"\x81"])
def test_eof_without_a_close_frame_reports_1006(data: bytes) -> None:
    events, sent = run(data, eof=True)
    assert events[-1] == Close(1006, "", clean=False)
    assert sent == b""


def test_a_close_frame_followed_by_eof_in_one_read_is_still_clean() -> None:
    conn = Connection()
    conn.feed(close_frame(1000))
    conn.feed(b"")
    assert drain(conn) == [Close(1000, "", clean=True)]


# -- message size → 1009 -----------------------------------------------------------------------


@pytest.mark.parametrize("split", SPLITS)
def test_a_message_at_the_limit_passes_and_one_byte_more_fails(split: int | None) -> None:
    conn = Connection(max_message_bytes=300)
    assert run(frame(Opcode.BINARY, bytes(300)), split=split, conn=conn)[0] == [
        BinaryMessage(bytes(300))
    ]
    closing, sent = failure(frame(Opcode.BINARY, bytes(301)), split=split, max_message_bytes=300)
    assert closing.code == 1009 and sent == sent_close(1009, closing.reason)


@pytest.mark.parametrize("split", SPLITS)
def test_the_limit_counts_the_whole_fragmented_message(split: int | None) -> None:
    data = text("a" * 60, fin=False) + frame(0, b"b" * 60, fin=False) + frame(0, b"c" * 60)
    closing, _ = failure(data, split=split, max_message_bytes=150)
    assert closing.code == 1009
    ok = Connection(max_message_bytes=150)
    assert len(run(data + data, conn=Connection(max_message_bytes=180))[0]) == 2
    assert run(text("a" * 150) + text("b" * 150), conn=ok)[0][1] == TextMessage("b" * 150)


def test_an_oversized_frame_fails_on_its_header() -> None:
    conn = Connection(max_message_bytes=1 << 20)
    conn.feed(frame(Opcode.BINARY, b"", length=1 << 40))  # header only, no payload
    assert drain(conn)[0].code == 1009


def test_no_limit_when_max_message_bytes_is_none() -> None:
    big = bytes(3 << 20)
    events, _ = run(frame(Opcode.BINARY, big), conn=Connection(max_message_bytes=None))
    assert events == [BinaryMessage(big)]


# -- pings -------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", SPLITS)
def test_ping_is_reported_and_auto_ponged_with_the_same_payload(split: int | None) -> None:
    events, sent = run(frame(Opcode.PING, b"x" * 125) + frame(Opcode.PING), split=split)
    assert events == [Ping(b"x" * 125), Ping(b"")]
    assert sent == b"\x8a\x7d" + b"x" * 125 + b"\x8a\x00"


def test_without_auto_pong_the_application_answers() -> None:
    conn = Connection(auto_pong=False)
    events, sent = run(frame(Opcode.PING, b"id"), conn=conn)
    assert (events, sent) == ([Ping(b"id")], b"")
    assert conn.pong(b"id") == b"\x8a\x02id"
    with pytest.raises(ValueError):
        conn.ping(b"x" * 126)


# -- sending -----------------------------------------------------------------------------------


def test_send_text_and_binary_encode_unmasked_frames() -> None:
    conn = Connection()
    assert conn.send_text("hé") == b"\x81\x03h\xc3\xa9"
    assert conn.send_binary(memoryview(b"\x00\x01")) == b"\x82\x02\x00\x01"


def test_fragmented_sends_cannot_be_interleaved_with_other_messages() -> None:
    conn = Connection()
    assert conn.send_binary(b"a", fin=False) == b"\x02\x01a"
    with pytest.raises(LocalProtocolError, match="binary message is in progress"):
        conn.send_text("x")
    with pytest.raises(LocalProtocolError, match="fragmented"):
        conn.send_raw(b"\x81\x00")
    assert conn.ping(b"!") == b"\x89\x01!"  # control frames may interleave
    assert conn.send_binary(b"b", fin=False) == b"\x00\x01b"
    assert conn.send_binary(b"c") == b"\x80\x01c"
    assert conn.send_text("next") == b"\x81\x04next"


def test_sends_carry_pending_replies_first_so_the_wire_keeps_protocol_order() -> None:
    conn = Connection()
    conn.feed(frame(Opcode.PING, b"1") + text("echo me"))
    assert drain(conn) == [Ping(b"1"), TextMessage("echo me")]
    assert conn.send_text("echo me") == b"\x8a\x011" + b"\x81\x07echo me"
    assert conn.data_to_send() == b""  # taken by the send
    for send, tail in (
        (lambda: conn.send_binary(b"x" * 200), b"\x82\x7e\x00\xc8" + b"x" * 200),
        (lambda: conn.send_raw(b"\x81\x00"), b"\x81\x00"),
        (lambda: conn.ping(b"p"), b"\x89\x01p"),
        (lambda: conn.close(1000), b"\x88\x02\x03\xe8"),
    ):
        conn.feed(frame(Opcode.PING, b"2"))
        drain(conn)
        assert send() == b"\x8a\x012" + tail


def test_send_raw_passes_a_shared_frame_through() -> None:
    encoded = b"\x81\x02hi"
    assert Connection().send_raw(encoded) is encoded


# -- the state table ---------------------------------------------------------------------------


def test_closed_is_final_and_every_other_state_can_end() -> None:
    assert all(source is not State.CLOSED for source, _ in TRANSITIONS)
    for state in (State.OPEN, State.CLOSE_SENT):
        for trigger in (Trigger.RECEIVE_CLOSE, Trigger.FAIL, Trigger.EOF):
            assert TRANSITIONS[(state, trigger)] is State.CLOSED
    assert (State.CLOSE_SENT, Trigger.SEND_CLOSE) not in TRANSITIONS


def test_events_iterates_until_more_data_is_needed() -> None:
    conn = Connection()
    conn.feed(text("a") + text("b") + text("c")[:3])
    assert list(conn.events()) == [TextMessage("a"), TextMessage("b")]


# -- random streams, random splits -------------------------------------------------------------

_message = st.one_of(
    st.tuples(st.just("text"), st.text(max_size=300)),
    st.tuples(st.just("binary"), st.binary(max_size=300)),
    st.tuples(st.just("ping"), st.binary(max_size=125)),
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list]:
    data: bytes = b""
    expected: list[Any] = []
    value: Any
    for kind, value in draw(st.lists(_message, max_size=8)):
        mask = draw(st.binary(min_size=4, max_size=4))
        if kind == "ping":
            data += frame(Opcode.PING, value, mask=mask)
            expected.append(Ping(value))
            continue
        raw = value.encode() if kind == "text" else value
        cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=3)))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        for i, piece in enumerate(pieces):
            opcode = (Opcode.TEXT if kind == "text" else Opcode.BINARY) if i == 0 else 0
            data += frame(opcode, piece, fin=i == len(pieces) - 1, mask=mask)
        expected.append(TextMessage(value) if kind == "text" else BinaryMessage(value))
    return data, expected


@settings(max_examples=200, deadline=None)
@given(streams(), st.lists(st.integers(1, 64), max_size=40))
def test_any_split_of_a_valid_stream_gives_the_same_events(stream: tuple, sizes: list) -> None:
    data, expected = stream
    conn, events, pos = Connection(), [], 0
    for size in [*sizes, len(data)]:
        if piece := data[pos : pos + size]:  # (b"" would mean EOF)
            conn.feed(piece)
        pos += size
        events.extend(drain(conn))
    assert events == expected
    assert conn.data_to_send() == b"".join(
        bytes((0x8A, len(e.payload))) + e.payload for e in expected if isinstance(e, Ping)
    )
