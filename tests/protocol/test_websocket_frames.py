"""RFC 6455 §5 wire format: encoding, unmasking, close payloads, and the §5.7 examples."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socketify.protocol.websocket import (
    CLOSED,
    NEED_DATA,
    BinaryMessage,
    CloseCode,
    Connection,
    Opcode,
    Pong,
    TextMessage,
    close_payload,
    frame_bytes,
    is_valid_close_code,
    unmask,
)

MASK = bytes.fromhex("37fa213d")  # the mask of the RFC 6455 §5.7 examples


def naive_unmask(data: bytes, mask: bytes) -> bytes:
    return bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def masked(frame: bytes, mask: bytes = MASK) -> bytes:
    """The client form of an unmasked frame: mask bit set, key inserted, payload masked."""
    b1 = frame[1] & 0x7F
    start = 2 + {126: 2, 127: 8}.get(b1, 0)
    return bytes((frame[0], frame[1] | 0x80)) + frame[2:start] + mask + unmask(frame[start:], mask)


def decode(data: bytes, *, split: int | None = None, **options: object) -> list:
    conn = Connection(**options)  # type: ignore[arg-type]
    pieces = [data] if split is None else [data[i : i + split] for i in range(0, len(data), split)]
    events: list = []
    for piece in pieces:
        conn.feed(piece)
        while (event := conn.next_event()) is not NEED_DATA and event is not CLOSED:
            events.append(event)
    return events


# -- RFC 6455 §5.7 examples --------------------------------------------------------------------


def test_rfc_single_frame_unmasked_hello_is_what_we_encode() -> None:
    assert frame_bytes(Opcode.TEXT, b"Hello") == bytes.fromhex("810548656c6c6f")


@pytest.mark.parametrize("split", [None, 1, 2, 5])
def test_rfc_single_frame_masked_hello_decodes(split: int | None) -> None:
    frame = bytes.fromhex("818537fa213d7f9f4d5158")
    assert masked(bytes.fromhex("810548656c6c6f")) == frame
    assert decode(frame, split=split) == [TextMessage("Hello")]


def test_rfc_fragmented_unmasked_hello_is_what_we_encode() -> None:
    conn = Connection()
    first = conn.send_text("Hel", fin=False)
    second = conn.send_text("lo")
    assert first == bytes.fromhex("010348656c")
    assert second == bytes.fromhex("80026c6f")


@pytest.mark.parametrize("split", [None, 1, 3])
def test_rfc_fragmented_masked_hello_decodes_as_one_message(split: int | None) -> None:
    data = masked(bytes.fromhex("010348656c")) + masked(
        bytes.fromhex("80026c6f"), b"\x01\x02\x03\x04"
    )
    assert decode(data, split=split) == [TextMessage("Hello")]


def test_rfc_ping_and_masked_pong() -> None:
    assert Connection().ping(b"Hello") == bytes.fromhex("890548656c6c6f")
    assert decode(bytes.fromhex("8a8537fa213d7f9f4d5158")) == [Pong(b"Hello")]


@pytest.mark.parametrize(
    ("size", "head"),
    [(256, "827e0100"), (65536, "827f0000000000010000")],
)
@pytest.mark.parametrize("split", [None, 4096])
def test_rfc_256_byte_and_64_kib_binary_frames(size: int, head: str, split: int | None) -> None:
    payload = os.urandom(size)
    frame = frame_bytes(Opcode.BINARY, payload)
    assert frame == bytes.fromhex(head) + payload
    assert decode(masked(frame), split=split) == [BinaryMessage(payload)]


@pytest.mark.parametrize(
    ("size", "header_length"), [(0, 2), (125, 2), (126, 4), (65535, 4), (65536, 10)]
)
def test_length_forms_at_their_boundaries(size: int, header_length: int) -> None:
    frame = frame_bytes(Opcode.BINARY, bytes(size))
    assert len(frame) == size + header_length
    assert decode(masked(frame), max_message_bytes=None) == [BinaryMessage(bytes(size))]


# -- encoding rules ----------------------------------------------------------------------------


def test_server_frames_are_never_masked() -> None:
    for frame in (frame_bytes(Opcode.TEXT, b"x" * 300), Connection().send_binary(b"abc")):
        assert not frame[1] & 0x80


@pytest.mark.parametrize(
    ("opcode", "payload", "options"),
    [
        (Opcode.PING, b"x" * 126, {}),
        (Opcode.PONG, b"", {"fin": False}),
        (Opcode.CLOSE, b"", {"rsv1": True}),
        (3, b"", {}),
        (0xB, b"", {}),
    ],
)
def test_frame_bytes_refuses_frames_the_rfc_forbids(
    opcode: int, payload: bytes, options: dict
) -> None:
    with pytest.raises(ValueError):
        frame_bytes(opcode, payload, **options)


def test_frame_bytes_sets_fin_and_rsv1_bits() -> None:
    assert frame_bytes(Opcode.TEXT, b"", fin=False)[0] == 0x01
    assert frame_bytes(Opcode.CONTINUATION, b"")[0] == 0x80
    assert frame_bytes(Opcode.BINARY, b"", rsv1=True)[0] == 0xC2


def test_one_encoded_frame_is_valid_on_every_connection() -> None:
    frame = frame_bytes(Opcode.TEXT, b"broadcast")
    for _ in range(3):
        conn = Connection()
        assert conn.send_raw(frame) is frame


# -- unmasking ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [*range(0, 20), 255, 256, 257, 258, 259, 1000, 65536, 65539])
def test_unmask_matches_the_definition_on_both_paths(size: int) -> None:
    data, mask = os.urandom(size), os.urandom(4)
    assert unmask(data, mask) == naive_unmask(data, mask)
    assert unmask(bytearray(data), bytearray(mask)) == naive_unmask(data, mask)


@given(st.binary(max_size=600), st.binary(min_size=4, max_size=4))
def test_unmask_is_its_own_inverse(data: bytes, mask: bytes) -> None:
    assert unmask(unmask(data, mask), mask) == data
    assert unmask(data, mask) == naive_unmask(data, mask)


# -- close codes and payloads ------------------------------------------------------------------

INVALID_CODES = [0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535]
VALID_CODES = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014]
VALID_CODES += [3000, 3999, 4000, 4999]


@pytest.mark.parametrize("code", VALID_CODES)
def test_valid_close_codes(code: int) -> None:
    assert is_valid_close_code(code)
    assert close_payload(code, "bye") == code.to_bytes(2, "big") + b"bye"


@pytest.mark.parametrize("code", INVALID_CODES)
def test_invalid_close_codes_are_never_sent(code: int) -> None:
    assert not is_valid_close_code(code)
    with pytest.raises(ValueError):
        close_payload(code)


def test_close_payload_limits() -> None:
    assert close_payload(None) == b""
    assert close_payload(CloseCode.NORMAL, "é" * 61) == b"\x03\xe8" + "é".encode() * 61
    with pytest.raises(ValueError):
        close_payload(CloseCode.NORMAL, "x" * 124)
    with pytest.raises(ValueError):
        close_payload(None, "a reason without a code")


def test_frame_bytes_takes_plain_int_opcodes() -> None:
    assert frame_bytes(9, b"x") == b"\x89\x01x"
    assert frame_bytes(2, b"", fin=False) == b"\x02\x00"
    with pytest.raises(ValueError):
        frame_bytes(9, b"x" * 126)
    with pytest.raises(ValueError):
        frame_bytes(-1, b"")
