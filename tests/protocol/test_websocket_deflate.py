"""permessage-deflate (RFC 7692): offers, negotiation, the §7.2.3 examples, limits."""

from __future__ import annotations

import os
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socketify.protocol.websocket import (
    CLOSED,
    NEED_DATA,
    BinaryMessage,
    Close,
    Connection,
    DeflateOptions,
    DeflateParams,
    Opcode,
    TextMessage,
    negotiate_deflate,
    parse_extensions,
    unmask,
)

MASK = bytes.fromhex("37fa213d")


def params(**changes: object) -> DeflateParams:
    values: dict = {
        "server_no_context_takeover": False,
        "client_no_context_takeover": False,
        "server_max_window_bits": 15,
        "client_max_window_bits": 15,
        "response": "permessage-deflate",
    }
    values.update(changes)
    return DeflateParams(**values)


def client(server_frame: bytes) -> bytes:
    """Mask a server-form frame (7-bit length) the way a client would send it."""
    assert server_frame[1] < 126
    return bytes((server_frame[0], server_frame[1] | 0x80)) + MASK + unmask(server_frame[2:], MASK)


def client_frame(payload: bytes, *, opcode: int = 1, fin: bool = True, rsv1: bool = True) -> bytes:
    n = len(payload)
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    if n < 126:
        head = bytes((b0, 0x80 | n))
    elif n < 0x10000:
        head = bytes((b0, 0xFE)) + n.to_bytes(2, "big")
    else:
        head = bytes((b0, 0xFF)) + n.to_bytes(8, "big")
    return head + MASK + unmask(payload, MASK)


def payload_of(server_frame: bytes) -> bytes:
    """The payload of an unmasked server frame."""
    return server_frame[{126: 4, 127: 10}.get(server_frame[1], 2) :]


def compressed(data: bytes, compressor: zlib._Compress | None = None) -> bytes:
    compressor = compressor or zlib.compressobj(6, zlib.DEFLATED, -15)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def receive(data: bytes, *, split: int | None = None, **options: object) -> list:
    conn = Connection(**{"deflate": params(), **options})  # type: ignore[arg-type]
    pieces = [data] if split is None else [data[i : i + split] for i in range(0, len(data), split)]
    events: list = []
    for piece in pieces:
        conn.feed(piece)
        while (event := conn.next_event()) is not NEED_DATA and event is not CLOSED:
            events.append(event)
    return events


def inflate_server_frames(frames: list[bytes], decompressor: zlib._Decompress) -> bytes:
    """What a client recovers from our compressed message frames (7-bit lengths)."""
    payload = b"".join(payload_of(f) for f in frames)
    return decompressor.decompress(payload + b"\x00\x00\xff\xff")


# -- RFC 7692 §7.2.3 examples ------------------------------------------------------------------

HELLO = bytes.fromhex("c107f248cdc9c90700")


def test_rfc_7_2_3_1_hello_in_one_compressed_block_is_what_we_send() -> None:
    assert Connection(deflate=params()).send_text("Hello") == HELLO


@pytest.mark.parametrize("split", [None, 1])
def test_rfc_7_2_3_1_hello_decodes_whole_and_fragmented(split: int | None) -> None:
    fragmented = client(bytes.fromhex("4103f248cd")) + client(bytes.fromhex("8004c9c90700"))
    assert receive(client(HELLO), split=split) == [TextMessage("Hello")]
    assert receive(fragmented, split=split) == [TextMessage("Hello")]


def test_rfc_7_2_3_2_sharing_the_sliding_window() -> None:
    conn = Connection(deflate=params())
    assert conn.send_text("Hello") == HELLO
    assert conn.send_text("Hello") == bytes.fromhex("c105f200110000")
    assert receive(client(HELLO) + client(bytes.fromhex("c105f200110000"))) == [
        TextMessage("Hello"),
        TextMessage("Hello"),
    ]


def test_rfc_7_2_3_2_without_context_takeover_every_message_starts_afresh() -> None:
    conn = Connection(deflate=params(server_no_context_takeover=True))
    assert conn.send_text("Hello") == HELLO
    assert conn.send_text("Hello") == HELLO


@pytest.mark.parametrize(
    "frame",
    [
        "c10b0005 00faff48656c6c6f00",  # §7.2.3.3 a block with no compression
        "c108f348cdc9c907 0000",  # §7.2.3.4 a block with BFINAL set
        "c10df248050000 00ffffcac9c90700",  # §7.2.3.5 two blocks in one message
    ],
)
def test_rfc_7_2_3_3_to_5_other_encodings_of_hello(frame: str) -> None:
    data = client(bytes.fromhex(frame.replace(" ", "")))
    assert receive(data + client(HELLO)) == [TextMessage("Hello"), TextMessage("Hello")]


def test_rfc_7_2_3_6_an_empty_message_is_one_zero_byte() -> None:
    assert Connection(deflate=params()).send_text("") == bytes.fromhex("c10100")
    assert receive(client(bytes.fromhex("c10100"))) == [TextMessage("")]


# -- receiving ---------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [None, 7])
def test_client_context_takeover_across_messages(split: int | None) -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    texts = ["the same words " * 20, "the same words " * 20, "and something else"]
    data = b"".join(client_frame(compressed(t.encode(), compressor)) for t in texts)
    assert receive(data, split=split) == [TextMessage(t) for t in texts]


def test_uncompressed_messages_are_allowed_alongside_compressed_ones() -> None:
    data = client_frame(b"plain", rsv1=False) + client_frame(compressed(b"\x00\x01"), opcode=2)
    assert receive(data) == [TextMessage("plain"), BinaryMessage(b"\x00\x01")]


def test_a_compressed_message_split_into_fragments() -> None:
    body = compressed(os.urandom(50) * 40)
    third = len(body) // 3
    data = (
        client_frame(body[:third], opcode=2, fin=False)
        + client_frame(body[third : 2 * third], opcode=0, fin=False, rsv1=False)
        + client_frame(body[2 * third :], opcode=0, rsv1=False)
    )
    [event] = receive(data, split=100)
    assert len(event.data) == 2000


def test_invalid_compressed_data_closes_with_1007() -> None:
    [closing] = receive(client_frame(b"\xff\xff\xff\xff"))
    assert closing.code == 1007


def test_compressed_text_that_is_not_utf8_closes_with_1007() -> None:
    [closing] = receive(client_frame(compressed(b"ok\xed\xa0\x80")))
    assert closing.code == 1007


def test_rsv1_is_an_error_when_deflate_was_not_negotiated() -> None:
    [closing] = receive(client(HELLO), deflate=None)
    assert closing.code == 1002


def zip_bomb(mebibytes: int) -> bytes:
    """Compressed zeros; after a full flush each MiB compresses to the same bytes."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert chunk == compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return chunk * mebibytes + b"\x00"  # then an empty stored block, as §7.2.1 leaves it


def test_zip_bomb_is_stopped_at_the_message_limit() -> None:
    bomb = client_frame(zip_bomb(500), opcode=2)  # 500 MiB of zeros in about 500 KiB
    tracemalloc.start()
    try:
        [closing] = receive(bomb, max_message_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert closing == Close(1009, closing.reason, clean=False)
    assert peak < 8 << 20  # the output never grew past the limit


def test_a_large_compressed_message_within_the_limit_passes() -> None:
    [event] = receive(client_frame(zip_bomb(3), opcode=2), max_message_bytes=3 << 20)
    assert event == BinaryMessage(bytes(3 << 20))


def test_inflated_size_limit_counts_the_whole_message() -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    first = compressor.compress(bytes(600)) + compressor.flush(zlib.Z_SYNC_FLUSH)
    last = compressed(bytes(600), compressor)
    data = client_frame(first, opcode=2, fin=False) + client_frame(last, opcode=0, rsv1=False)
    [closing] = receive(data, max_message_bytes=1000)
    assert closing.code == 1009
    assert receive(data, max_message_bytes=1200) == [BinaryMessage(bytes(1200))]


# -- sending -----------------------------------------------------------------------------------


def test_control_frames_are_never_compressed() -> None:
    conn = Connection(deflate=params())
    assert conn.ping(b"hi") == b"\x89\x02hi"
    assert conn.close(1000) == b"\x88\x02\x03\xe8"


def test_messages_under_min_size_go_out_uncompressed() -> None:
    conn = Connection(deflate=params(min_size=10))
    assert conn.send_text("short") == b"\x81\x05short"
    assert conn.send_text("long enough")[0] == 0xC1


def test_a_fragmented_send_sets_rsv1_on_the_first_frame_only() -> None:
    conn = Connection(deflate=params())
    frames = [
        conn.send_text("Hel", fin=False),
        conn.send_text("lo", fin=False),
        conn.send_text(""),
    ]
    assert [f[0] for f in frames] == [0x41, 0x00, 0x80]
    assert inflate_server_frames(frames, zlib.decompressobj(-15)) == b"Hello"


@pytest.mark.parametrize("bits", [8, 9, 12, 15])
def test_server_window_bits_are_respected(bits: int) -> None:
    conn = Connection(deflate=params(server_max_window_bits=bits))
    decompressor = zlib.decompressobj(-bits)  # a client holding only the agreed window
    # Repeats at distances just over each window size tempt the compressor to reach back.
    data = b"".join(os.urandom((1 << b) + 40) * 4 for b in range(8, 16))
    for _ in range(3):
        frame = conn.send_binary(data)
        assert decompressor.decompress(payload_of(frame) + b"\x00\x00\xff\xff") == data


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(max_size=400), min_size=1, max_size=5),
    st.booleans(),
)
def test_a_client_recovers_every_message_we_compress(texts: list[str], takeover: bool) -> None:
    conn = Connection(deflate=params(server_no_context_takeover=not takeover))
    decompressor = zlib.decompressobj(-15)
    for text in texts:
        frame = conn.send_text(text)
        if not takeover:
            decompressor = zlib.decompressobj(-15)
        out = decompressor.decompress(payload_of(frame) + b"\x00\x00\xff\xff")
        assert out.decode() == text


# -- offers and negotiation --------------------------------------------------------------------


def test_parse_extensions_grammar() -> None:
    assert parse_extensions(
        ['permessage-deflate; client_max_window_bits; server_max_window_bits="10", foo', "bar;x=1"]
    ) == [
        (
            "permessage-deflate",
            [("client_max_window_bits", None), ("server_max_window_bits", "10")],
        ),
        ("foo", []),
        ("bar", [("x", "1")]),
    ]
    assert parse_extensions(["a ,, b"]) == [("a", []), ("b", [])]


@pytest.mark.parametrize("value", ["permessage-deflate;", 'x; y="a b"', "x y", "; x", 'x; y="1'])
def test_parse_extensions_refuses_malformed_lists(value: str) -> None:
    with pytest.raises(ValueError):
        parse_extensions([value])


def negotiate(offer: str, **options: object) -> str | None:
    accepted = negotiate_deflate(parse_extensions([offer]), DeflateOptions(**options))  # type: ignore[arg-type]
    return None if accepted is None else accepted.response


@pytest.mark.parametrize(
    ("offer", "response"),
    [
        ("permessage-deflate", "permessage-deflate"),
        ("permessage-deflate; client_max_window_bits", "permessage-deflate"),
        (
            "permessage-deflate; server_no_context_takeover",
            "permessage-deflate; server_no_context_takeover",
        ),
        (
            "permessage-deflate; client_no_context_takeover",
            "permessage-deflate; client_no_context_takeover",
        ),
        (
            "permessage-deflate; server_max_window_bits=10",
            "permessage-deflate; server_max_window_bits=10",
        ),
        (
            "permessage-deflate; client_max_window_bits=9",
            "permessage-deflate; client_max_window_bits=9",
        ),
        ("x-unknown, permessage-deflate", "permessage-deflate"),
        (  # the first offer is invalid, the fallback is accepted (RFC 7692 §7.1.3)
            "permessage-deflate; server_max_window_bits=7, permessage-deflate",
            "permessage-deflate",
        ),
        ("Permessage-Deflate; Server_No_Context_Takeover", None),  # params are case-insensitive
    ],
)
def test_negotiation_answers_each_offer(offer: str, response: str | None) -> None:
    if response is None:
        assert negotiate(offer) == "permessage-deflate; server_no_context_takeover"
    else:
        assert negotiate(offer) == response


@pytest.mark.parametrize(
    "offer",
    [
        "permessage-deflate; server_max_window_bits",  # a value is required
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=010",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; mystery",
        "x-webkit-deflate-frame",
    ],
)
def test_invalid_offers_are_declined(offer: str) -> None:
    assert negotiate(offer) is None


def test_server_options_shape_the_response() -> None:
    assert negotiate(
        "permessage-deflate; client_max_window_bits",
        server_no_context_takeover=True,
        client_no_context_takeover=True,
        server_max_window_bits=12,
        client_max_window_bits=10,
    ) == (
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
        "server_max_window_bits=12; client_max_window_bits=10"
    )
    # client_max_window_bits may only be answered when offered
    assert negotiate("permessage-deflate", client_max_window_bits=10) == "permessage-deflate"
    # the smaller of the offer and our limit
    assert negotiate(
        "permessage-deflate; server_max_window_bits=14", server_max_window_bits=11
    ) == ("permessage-deflate; server_max_window_bits=11")


def test_negotiated_params_drive_the_connection() -> None:
    [offer] = parse_extensions(["permessage-deflate; server_no_context_takeover"])
    accepted = negotiate_deflate([offer], DeflateOptions(level=9, min_size=3))
    assert accepted is not None
    assert accepted.server_no_context_takeover and accepted.level == 9
    conn = Connection(deflate=accepted)
    assert conn.deflate is accepted
    assert conn.send_text("Hello") == conn.send_text("Hello") == HELLO
    assert conn.send_text("Hi") == b"\x81\x02Hi"


@pytest.mark.parametrize(
    "options",
    [{"server_max_window_bits": 7}, {"client_max_window_bits": 16}, {"level": 10}],
)
def test_deflate_options_are_validated(options: dict) -> None:
    with pytest.raises(ValueError):
        DeflateOptions(**options)


def test_send_binary_compresses_with_rsv1() -> None:
    frame = Connection(deflate=params()).send_binary(bytes(1000))
    assert frame[0] == 0xC2 and len(frame) < 30
    assert Opcode(frame[0] & 0x0F) is Opcode.BINARY


def test_fragments_mode_inflates_frame_by_frame() -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    first = compressor.compress("ünïcode ".encode() * 10) + compressor.flush(zlib.Z_SYNC_FLUSH)
    last = compressed(b"end", compressor)
    data = client_frame(first, fin=False) + client_frame(last, opcode=0, rsv1=False)
    events = receive(data, split=5, fragments=True)
    assert [(e.first, e.final) for e in events] == [(True, False), (False, True)]
    assert "".join(e.text for e in events) == "ünïcode " * 10 + "end"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(max_size=200), min_size=1, max_size=6),
    st.lists(st.integers(1, 50), max_size=30),
)
def test_any_split_of_compressed_messages_gives_the_same_events(
    texts: list[str], sizes: list[int]
) -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = b"".join(client_frame(compressed(t.encode(), compressor)) for t in texts)
    conn, events, pos = Connection(deflate=params()), [], 0
    for size in [*sizes, len(data)]:
        if piece := data[pos : pos + size]:
            conn.feed(piece)
        pos += size
        while (event := conn.next_event()) is not NEED_DATA:
            events.append(event)
    assert events == [TextMessage(t) for t in texts]
