"""The `PM` media frame format byte for byte, and what `MediaHub` sends."""

from __future__ import annotations

import time

import pytest

from socketify.protocol.websocket import Connection as Protocol
from socketify.protocol.websocket import Opcode
from socketify.realtime import pulse
from socketify.realtime.pulse.channel import Channel
from socketify.realtime.pulse.media import Flag, Frame, Kind, MediaHub, now_us, pack, unpack
from workers.shared.bus import LocalBus

# The format's worked example: pack(Voice, stream 1, seq 42, ts 1000, flags 0, "pcm").
WORKED_EXAMPLE = bytes.fromhex("50 4D 01 00 01 00 00 00 2A 00 00 00 00 00 00 03 E8 00 70 63 6D")


def test_voice_frame_matches_the_spec_worked_example_byte_for_byte() -> None:
    assert pack(Kind.VOICE, 1, 42, 1000, 0, b"pcm") == WORKED_EXAMPLE
    frame = unpack(WORKED_EXAMPLE)
    assert frame == Frame(Kind.VOICE, 1, 42, 1000, 0, b"pcm")
    assert frame is not None and frame.raw == WORKED_EXAMPLE and frame.encode() == WORKED_EXAMPLE


def test_image_kinds_carry_a_big_endian_mime_length_even_when_empty() -> None:
    wire = pack(Kind.IMAGE, 0x0102, 7, 2**40 + 5, Flag.LAST, b"\xff\xd8", "image/png")
    assert wire[:18] == bytes.fromhex("50 4D 03 01 02 00 00 00 07 00 00 01 00 00 00 00 05 02")
    assert wire[18:20] == b"\x00\x09" and wire[20:29] == b"image/png" and wire[29:] == b"\xff\xd8"
    assert unpack(wire) == Frame(Kind.IMAGE, 0x0102, 7, 2**40 + 5, 2, b"\xff\xd8", "image/png")
    end = pack(Kind.IMAGE_END, 3, 8, 9, Flag.LAST)
    assert end[18:] == b"\x00\x00"
    parsed = unpack(end)
    assert parsed is not None and parsed.kind is Kind.IMAGE_END and parsed.is_last
    assert parsed.mime == "" and parsed.payload == b""


def test_video_and_voice_have_no_mime_field_and_may_be_empty() -> None:
    wire = pack(Kind.VIDEO, 2, 1, 0, Flag.KEY_FRAME)
    assert len(wire) == 18
    frame = unpack(wire)
    assert frame is not None and frame.is_key_frame and not frame.is_last and frame.payload == b""


@pytest.mark.parametrize(
    "wire",
    [
        WORKED_EXAMPLE[:17],  # shorter than the fixed header
        b"PX" + WORKED_EXAMPLE[2:],  # wrong magic
        b"PM\x05" + WORKED_EXAMPLE[3:],  # unknown kind: refused, not passed on
        b"PM\x00" + WORKED_EXAMPLE[3:],  # kind 0 is not a kind either
        pack(Kind.IMAGE, 0, 1, 0)[:19],  # image kind without its two mime-length bytes
        pack(Kind.IMAGE, 0, 1, 0, 0, b"", "image/png")[:25],  # mime cut short
        pack(Kind.IMAGE, 0, 1, 0)[:18] + b"\x00\x02\xc3\xa9",  # mime that is not ASCII
    ],
)
def test_unpack_rejects_short_foreign_unknown_and_truncated_frames(wire: bytes) -> None:
    assert unpack(wire) is None


def test_pack_refuses_unknown_kinds_and_wraps_seq_at_32_bits() -> None:
    with pytest.raises(ValueError):
        pack(9, 0, 0, 0)
    frame = unpack(pack(Kind.VOICE, 0, 2**32 + 3, 0))
    assert frame is not None and frame.seq == 3


def test_now_us_is_monotonic_microseconds() -> None:
    first = now_us()
    time.sleep(0.002)
    second = now_us()
    assert 1_000 <= second - first < 1_000_000
    assert abs(first - time.monotonic_ns() // 1000) < 1_000_000


def _hub_with_members(count: int) -> tuple[MediaHub, list[Channel]]:
    """A media hub on a private bus, with real (not yet connected) channels as members."""
    hub = MediaHub(pulse.Hub(name="media-units", bus=LocalBus()))
    members = [Channel(Protocol()) for _ in range(count)]
    for ch in members:
        assert hub.join("call", ch)
    return hub, members


def _sent_frames(ch: Channel) -> list[Frame]:
    """The media frames queued on `ch` (server frames are unmasked; these are all short)."""
    wire = ch.queued()  # nothing is written before the channel is connected
    frames = []
    while wire:
        assert wire[0] == 0x80 | Opcode.BINARY and wire[1] < 126
        frame = unpack(wire[2 : 2 + wire[1]])
        assert frame is not None
        frames.append(frame)
        wire = wire[2 + wire[1] :]
    return frames


def test_send_functions_count_seq_per_key_and_end_image_keeps_the_begun_mime() -> None:
    hub, (first, second) = _hub_with_members(2)
    hub.send_voice("call", b"a", stream_id=1)
    hub.send_voice("call", b"b", stream_id=1)
    hub.send_voice("call", b"c", stream_id=2)
    hub.send_video("call", b"v", keyframe=True, stream_id=1)
    hub.begin_image("call", "image/webp", stream_id=5)
    hub.write_image("call", b"chunk", stream_id=5)
    hub.end_image("call", stream_id=5)
    hub.send_image("call", b"whole", "image/png", exclude=first)
    sent = _sent_frames(first)
    assert [(f.kind, f.stream_id, f.seq) for f in sent] == [
        (Kind.VOICE, 1, 1),
        (Kind.VOICE, 1, 2),
        (Kind.VOICE, 2, 1),
        (Kind.VIDEO, 1, 1),
        (Kind.IMAGE, 5, 1),
        (Kind.IMAGE, 5, 2),
        (Kind.IMAGE_END, 5, 3),
    ]
    assert sent[3].is_key_frame and sent[6].is_last
    assert [f.mime for f in sent[4:]] == ["image/webp", "", "image/webp"]  # not image/jpeg
    stamps = [f.timestamp_us for f in sent]
    assert stamps == sorted(stamps) and abs(stamps[0] - now_us()) < 1_000_000  # monotonic µs
    whole = _sent_frames(second)[-1]
    assert (whole.mime, whole.payload, whole.seq, whole.is_last) == ("image/png", b"whole", 1, True)


def test_relay_sends_the_received_bytes_so_the_clients_seq_and_timestamp_survive() -> None:
    hub, (sender, listener) = _hub_with_members(2)
    received = unpack(pack(Kind.VOICE, 9, 4242, 987_654_321, 0, b"pcm"))
    assert received is not None
    hub.relay("call", received, exclude=sender)
    assert _sent_frames(sender) == []
    assert _sent_frames(listener) == [received]
    assert _sent_frames(listener)[0].raw == received.raw
