"""Our frame reading and writing against `hyperframe`: the same frames, both ways; and the
framing layer, which must cut any sequence of bytes into the same frames."""

from __future__ import annotations

import pytest
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from socketify.protocol.http2 import ConnectionTerminated, Http2ServerConnection, frames
from socketify.protocol.http2.frame_reader import FrameReader
from socketify.protocol.http2.frames import ErrorCode, FrameType, Http2Error

stream_ids = st.integers(min_value=1, max_value=(1 << 31) - 1)
payloads = st.binary(max_size=300)
pads = st.integers(min_value=0, max_value=255)
words = st.integers(min_value=0, max_value=(1 << 31) - 1)


def parsed(raw: bytes) -> tuple[int, int, int, bytes]:
    """(type, flags, stream id, payload) of one serialized frame, read with our reader."""
    length, kind, flags, stream_id = frames.read_header(raw)
    assert len(raw) == 9 + length
    return kind, flags, stream_id, raw[9:]


def theirs(raw: bytes) -> Frame:
    """The frame `hyperframe` reads from `raw`."""
    frame, length = Frame.parse_frame_header(memoryview(raw[:9]))
    frame.parse_body(memoryview(raw[9 : 9 + length]))
    return frame


@settings(max_examples=200, deadline=None)
@given(stream_id=stream_ids, data=payloads, pad=st.one_of(st.none(), pads), end=st.booleans())
def test_data_frames_read_as_hyperframe_wrote_them(
    stream_id: int, data: bytes, pad: int | None, end: bool
) -> None:
    frame = DataFrame(stream_id, data, pad_length=pad or 0)
    if pad is not None:
        frame.flags.add("PADDED")
    if end:
        frame.flags.add("END_STREAM")
    kind, flags, sid, payload = parsed(frame.serialize())
    assert (kind, sid) == (FrameType.DATA, stream_id)
    assert frames.unpad(flags, payload) == data
    assert bool(flags & frames.END_STREAM) == end


@settings(max_examples=200, deadline=None)
@given(
    stream_id=stream_ids,
    block=payloads,
    pad=st.one_of(st.none(), pads),
    priority=st.one_of(st.none(), st.tuples(words, st.integers(0, 255), st.booleans())),
)
def test_headers_frames_read_as_hyperframe_wrote_them(
    stream_id: int, block: bytes, pad: int | None, priority: tuple[int, int, bool] | None
) -> None:
    frame = HeadersFrame(stream_id, block, pad_length=pad or 0)
    frame.flags.add("END_HEADERS")
    if pad is not None:
        frame.flags.add("PADDED")
    if priority is not None:
        frame.depends_on, frame.stream_weight, frame.exclusive = priority
        frame.flags.add("PRIORITY")
    kind, flags, sid, payload = parsed(frame.serialize())
    assert (kind, sid) == (FrameType.HEADERS, stream_id)
    fragment, depends_on = frames.headers_fragment(flags, payload)
    assert fragment == block
    assert depends_on == (priority[0] if priority else None)


@settings(max_examples=100, deadline=None)
@given(stream_id=stream_ids, depends_on=words, weight=st.integers(0, 255), exclusive=st.booleans())
def test_priority_frames_read_as_hyperframe_wrote_them(
    stream_id: int, depends_on: int, weight: int, exclusive: bool
) -> None:
    frame = PriorityFrame(
        stream_id, depends_on=depends_on, stream_weight=weight, exclusive=exclusive
    )
    kind, _flags, sid, payload = parsed(frame.serialize())
    assert (kind, sid) == (FrameType.PRIORITY, stream_id)
    # hyperframe keeps the weight as sent (0-255); it stands for 1-256.
    assert frames.priority_fields(payload) == (exclusive, depends_on, weight + 1)


@settings(max_examples=100, deadline=None)
# hyperframe writes only the low byte of an identifier: the defined ones all fit in it.
@given(values=st.dictionaries(st.integers(0, 0xFF), st.integers(0, (1 << 32) - 1), max_size=8))
def test_settings_read_and_written_as_hyperframe_does(values: dict[int, int]) -> None:
    kind, flags, sid, payload = parsed(SettingsFrame(0, settings=values).serialize())
    assert (kind, flags, sid) == (FrameType.SETTINGS, 0, 0)
    assert dict(frames.settings_values(payload)) == values
    assert theirs(frames.settings(values.items())).settings == values  # type: ignore[attr-defined]


@settings(max_examples=100, deadline=None)
@given(stream_id=stream_ids, code=st.integers(0, (1 << 32) - 1))
def test_rst_stream_read_and_written_as_hyperframe_does(stream_id: int, code: int) -> None:
    _kind, _flags, sid, payload = parsed(RstStreamFrame(stream_id, error_code=code).serialize())
    assert (sid, frames.word(payload, "RST_STREAM")) == (stream_id, code)
    frame = theirs(frames.rst_stream(stream_id, code))
    assert isinstance(frame, RstStreamFrame)
    assert (frame.stream_id, frame.error_code) == (stream_id, code)


@settings(max_examples=100, deadline=None)
@given(stream_id=st.integers(0, (1 << 31) - 1), increment=st.integers(1, (1 << 31) - 1))
def test_window_update_read_and_written_as_hyperframe_does(stream_id: int, increment: int) -> None:
    raw = WindowUpdateFrame(stream_id, window_increment=increment).serialize()
    _kind, _flags, sid, payload = parsed(raw)
    assert (sid, frames.word(payload, "WINDOW_UPDATE")) == (stream_id, increment)
    frame = theirs(frames.window_update(stream_id, increment))
    assert isinstance(frame, WindowUpdateFrame)
    assert (frame.stream_id, frame.window_increment) == (stream_id, increment)


@settings(max_examples=100, deadline=None)
@given(last=words, code=st.integers(0, (1 << 32) - 1), debug=payloads)
def test_goaway_read_and_written_as_hyperframe_does(last: int, code: int, debug: bytes) -> None:
    raw = GoAwayFrame(0, last_stream_id=last, error_code=code, additional_data=debug).serialize()
    assert frames.goaway_fields(parsed(raw)[3]) == (last, code, debug)
    frame = theirs(frames.goaway(last, code, debug))
    assert isinstance(frame, GoAwayFrame)
    assert (frame.last_stream_id, frame.error_code, frame.additional_data) == (last, code, debug)


@settings(max_examples=100, deadline=None)
@given(opaque=st.binary(min_size=8, max_size=8))
def test_ping_answers_read_as_hyperframe_acks(opaque: bytes) -> None:
    frame = theirs(frames.ping_ack(opaque))
    assert isinstance(frame, PingFrame)
    assert frame.opaque_data == opaque and "ACK" in frame.flags
    assert parsed(PingFrame(0, opaque_data=opaque).serialize())[3] == opaque


@settings(max_examples=100, deadline=None)
@given(
    stream_id=stream_ids,
    block=st.binary(max_size=40_000),
    end=st.booleans(),
    frame_size=st.sampled_from([16384, 20000, 1 << 20]),
)
def test_headers_we_write_continue_in_frames_hyperframe_reassembles(
    stream_id: int, block: bytes, end: bool, frame_size: int
) -> None:
    raw = frames.headers(stream_id, block, end, frame_size)
    pos, got, kinds = 0, b"", []
    while pos < len(raw):
        frame = theirs(raw[pos:])
        assert frame.stream_id == stream_id and len(frame.data) <= frame_size  # type: ignore[attr-defined]
        kinds.append(type(frame))
        got += frame.data  # type: ignore[attr-defined]
        pos += 9 + frames.read_header(raw, pos)[0]
    assert got == block
    assert kinds[0] is HeadersFrame and set(kinds[1:]) <= {ContinuationFrame}
    assert ("END_STREAM" in theirs(raw).flags) == end


@settings(max_examples=100, deadline=None)
@given(stream_id=stream_ids, data=payloads, end=st.booleans())
def test_data_we_write_reads_as_hyperframe_data(stream_id: int, data: bytes, end: bool) -> None:
    frame = theirs(frames.data_header(stream_id, len(data), end) + data)
    assert isinstance(frame, DataFrame)
    assert (frame.stream_id, frame.data, "END_STREAM" in frame.flags) == (stream_id, data, end)


def test_push_promise_and_continuation_headers_read_too() -> None:
    for frame in (PushPromiseFrame(1, promised_stream_id=2, data=b"x"), ContinuationFrame(3, b"y")):
        kind, _flags, sid, _payload = parsed(frame.serialize())
        assert (kind, sid) == (frame.type, frame.stream_id)


@pytest.mark.parametrize(
    ("reader", "payload", "code"),
    [
        (lambda p: frames.unpad(frames.PADDED, p), b"\x05abcd", ErrorCode.PROTOCOL_ERROR),
        (lambda p: frames.unpad(frames.PADDED, p), b"", ErrorCode.PROTOCOL_ERROR),
        (lambda p: frames.headers_fragment(frames.PADDED, p), b"\x09ab", ErrorCode.PROTOCOL_ERROR),
        (
            lambda p: frames.headers_fragment(frames.PRIORITY_FLAG, p),
            b"abc",
            ErrorCode.PROTOCOL_ERROR,
        ),
        (frames.priority_fields, b"abcd", ErrorCode.FRAME_SIZE_ERROR),
        (frames.settings_values, b"abcdefg", ErrorCode.FRAME_SIZE_ERROR),
        (lambda p: frames.word(p, "RST_STREAM"), b"abc", ErrorCode.FRAME_SIZE_ERROR),
        (frames.goaway_fields, b"abcdefg", ErrorCode.FRAME_SIZE_ERROR),
    ],
)
def test_payloads_that_break_their_frames_rules_are_refused(
    reader: object, payload: bytes, code: int
) -> None:
    with pytest.raises(Http2Error) as refused:
        reader(payload)  # type: ignore[operator]
    assert refused.value.code == code


# -- the framing layer: bytes in any pieces, frames and whole header blocks out ----------------


def settings_frame() -> bytes:
    return SettingsFrame(0).serialize()


@settings(max_examples=100, deadline=None)
@given(
    blocks=st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=5),
    bodies=st.lists(st.binary(max_size=2000), max_size=5),
    cuts=st.lists(st.integers(min_value=1, max_value=500), max_size=40),
)
def test_frames_come_out_whole_however_the_bytes_are_cut(
    blocks: list[bytes], bodies: list[bytes], cuts: list[int]
) -> None:
    raw = frames.PREFACE + settings_frame()
    expected: list[tuple[int, int, int, bytes]] = [(FrameType.SETTINGS, 0, 0, b"")]
    for number, block in enumerate(blocks):
        stream_id = 2 * number + 1
        # Each block split over a HEADERS and CONTINUATION frames of at most 1000 bytes.
        raw += frames.headers(stream_id, block, end_stream=False, frame_size=1000)
        expected.append((FrameType.HEADERS, frames.END_HEADERS, stream_id, block))
        for body in bodies:
            raw += DataFrame(stream_id, body).serialize()
            expected.append((FrameType.DATA, 0, stream_id, body))
    reader = FrameReader(frame_limit=16384, block_limit=1 << 20)
    got: list[tuple[int, int, int, bytes]] = []
    pos = 0
    for cut in [*cuts, len(raw)]:
        got += reader.frames(raw[pos : pos + cut])
        pos += cut
    got += reader.frames(raw[pos:])
    assert got == expected


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", ErrorCode.PROTOCOL_ERROR),
        (frames.PREFACE + PingFrame(0).serialize(), ErrorCode.PROTOCOL_ERROR),
        (frames.PREFACE + bytes((0, 0x50, 0, 4, 0, 0, 0, 0, 0)), ErrorCode.FRAME_SIZE_ERROR),
        (
            frames.PREFACE + SettingsFrame(0).serialize() + ContinuationFrame(1, b"x").serialize(),
            ErrorCode.PROTOCOL_ERROR,
        ),
        (
            frames.PREFACE
            + SettingsFrame(0).serialize()
            + HeadersFrame(1, b"x").serialize()
            + PingFrame(0).serialize(),
            ErrorCode.PROTOCOL_ERROR,
        ),
        (
            frames.PREFACE
            + SettingsFrame(0).serialize()
            + HeadersFrame(1, b"x" * 10000).serialize()
            + ContinuationFrame(1, b"x" * 10000).serialize()[:20],
            ErrorCode.ENHANCE_YOUR_CALM,
        ),
    ],
    ids=["not-the-preface", "first-frame-not-settings", "frame-over-the-limit",
         "continuation-alone", "frame-inside-a-block", "block-over-the-limit"],
)  # fmt: skip
def test_framing_rules_are_enforced_before_the_frames_are_whole(raw: bytes, code: int) -> None:
    reader = FrameReader(frame_limit=16384, block_limit=15000)
    with pytest.raises(Http2Error) as refused:
        list(reader.frames(raw))
    assert refused.value.code == code


# -- hostile input: whatever the bytes, events or a GOAWAY, never an exception ----------------


_frame_kinds = st.sampled_from([*range(10), 0x10, 0xFA])


@st.composite
def hostile_frames(draw: st.DrawFn) -> bytes:
    """A frame with a real or unknown type, any flags and stream, and a short payload."""
    payload = draw(st.binary(max_size=40))
    kind, flags = draw(_frame_kinds), draw(st.integers(0, 255))
    stream_id = draw(st.sampled_from([0, 1, 2, 3, 5, 0x7FFFFFFF, 0x80000001]))
    return (
        len(payload).to_bytes(3, "big")
        + bytes((kind, flags))
        + stream_id.to_bytes(4, "big")
        + payload
    )


@settings(max_examples=300, deadline=None)
@given(frames_sent=st.lists(hostile_frames(), max_size=12), cut=st.integers(1, 50))
def test_any_sequence_of_frames_is_answered_never_raised(
    frames_sent: list[bytes], cut: int
) -> None:
    server = Http2ServerConnection()
    raw = frames.PREFACE + SettingsFrame(0).serialize() + b"".join(frames_sent)
    for start in range(0, len(raw), cut):
        events = server.receive_data(raw[start : start + cut])
        assert all(
            not isinstance(event, ConnectionTerminated) or not event.by_peer for event in events
        )
        server.data_to_send()
