"""RFC 6455 conformance over raw sockets against the Autobahn echo app, needing nothing else.

The same app and route as `load_tests/autobahn.py` (`load_tests.apps.ws_echo`, `/echo`, two
workers); the cases mirror Autobahn's groups 1-7 (framing, pings, reserved bits, opcodes,
fragmentation, UTF-8, closing) and 9's size limit, so CI checks them even without the
Python 2.7 fuzzing client. A failure must come back as a close frame with the right code,
followed by the server ending TCP.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.raw_websocket import (
    BINARY,
    CLOSE,
    CONTINUATION,
    PING,
    PONG,
    TEXT,
    RawWebSocket,
    client_frame,
    close_frame,
)
from tests.support.serve import Launcher

LIMIT = 64 << 20  # ws_echo.MAX_MESSAGE_BYTES


@pytest.fixture(scope="module")
def echo_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`socketify run load_tests.apps.ws_echo:server --workers 2`."""
    with Launcher(tmp_path_factory.mktemp("echo")) as launcher:
        yield launcher("load_tests.apps.ws_echo:server", workers=2).port


@pytest.fixture
def ws(echo_port: int) -> Iterator[RawWebSocket]:
    """A fresh upgraded connection to /echo (no extension offered)."""
    with RawWebSocket(echo_port, "/echo") as conn:
        yield conn


def _fails_with(ws: RawWebSocket, code: int) -> None:
    close = ws.expect_close()
    assert close.close_code == code, close
    assert ws.at_eof(), "the server must end TCP after failing the connection"


def _echo(ws: RawWebSocket, opcode: int, payload: bytes) -> None:
    ws.send(client_frame(opcode, payload))
    assert ws.recv_message() == (opcode, payload)


# -- framing (Autobahn 1.*) and the size limit (9.*) ----------------------------------------


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 300_000])
@pytest.mark.parametrize("opcode", [TEXT, BINARY])
def test_messages_of_each_length_encoding_are_echoed(
    ws: RawWebSocket, opcode: int, size: int
) -> None:
    _echo(ws, opcode, b"*" * size)


def test_unmasked_client_frame_fails_with_1002(ws: RawWebSocket) -> None:
    ws.send(client_frame(TEXT, b"hello", masked=False))
    _fails_with(ws, 1002)


def test_a_frame_over_the_message_limit_fails_on_its_header_with_1009(ws: RawWebSocket) -> None:
    ws.send(client_frame(BINARY, b"", declared=LIMIT + 1)[:14])  # header and mask only
    _fails_with(ws, 1009)


def test_a_fragmented_message_over_the_limit_fails_with_1009(ws: RawWebSocket) -> None:
    ws.send(client_frame(BINARY, b"x" * 100, fin=False))
    ws.send(client_frame(CONTINUATION, b"", declared=LIMIT - 99)[:14])
    _fails_with(ws, 1009)


def test_non_minimal_length_encoding_fails_with_1002(ws: RawWebSocket) -> None:
    ws.send(bytes((0x81, 0xFE, 0, 5)) + b"\0\0\0\0" + b"hello")  # 5 in the 16-bit form
    _fails_with(ws, 1002)


# -- pings and pongs (2.*) ------------------------------------------------------------------


@pytest.mark.parametrize("payload", [b"", b"abc", bytes(range(125))])
def test_ping_is_answered_with_a_pong_carrying_the_same_payload(
    ws: RawWebSocket, payload: bytes
) -> None:
    ws.send(client_frame(PING, payload))
    pong = ws.recv_frame()
    assert (pong.opcode, pong.payload, pong.fin) == (PONG, payload, True)


def test_unsolicited_pong_is_ignored(ws: RawWebSocket) -> None:
    ws.send(client_frame(PONG, b"unasked"))
    _echo(ws, TEXT, b"still fine")


def test_pings_in_one_packet_get_pongs_in_order(ws: RawWebSocket) -> None:
    ws.send(b"".join(client_frame(PING, str(n).encode()) for n in range(10)))
    assert [ws.recv_frame().payload for _ in range(10)] == [str(n).encode() for n in range(10)]


@pytest.mark.parametrize(
    "frame",
    [
        client_frame(PING, b"x" * 126),  # control payload over 125 bytes
        client_frame(PING, b"abc", fin=False),  # fragmented control frame
        client_frame(CLOSE, b"\x03\xe8" + b"x" * 124),
    ],
    ids=["ping-126-bytes", "ping-not-final", "close-126-bytes"],
)
def test_bad_control_frames_fail_with_1002(ws: RawWebSocket, frame: bytes) -> None:
    ws.send(frame)
    _fails_with(ws, 1002)


# -- reserved bits (3.*) and opcodes (4.*) --------------------------------------------------


@pytest.mark.parametrize("rsv", [0b001, 0b010, 0b011, 0b100, 0b111])
@pytest.mark.parametrize("opcode", [TEXT, BINARY, PING])
def test_reserved_bits_without_an_extension_fail_with_1002(
    ws: RawWebSocket, rsv: int, opcode: int
) -> None:
    ws.send(client_frame(opcode, b"hello", rsv=rsv))
    _fails_with(ws, 1002)


def test_reserved_bits_fail_after_a_good_message_in_the_same_packet(ws: RawWebSocket) -> None:
    ws.send(client_frame(TEXT, b"first") + client_frame(TEXT, b"bad", rsv=0b010))
    assert ws.recv_message() == (TEXT, b"first")
    _fails_with(ws, 1002)


@pytest.mark.parametrize("opcode", [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF])
def test_reserved_opcodes_fail_with_1002(ws: RawWebSocket, opcode: int) -> None:
    ws.send(client_frame(opcode, b"?"))
    _fails_with(ws, 1002)


# -- fragmentation (5.*) --------------------------------------------------------------------


def test_fragmented_message_is_reassembled_around_an_interleaved_ping(ws: RawWebSocket) -> None:
    ws.send(client_frame(TEXT, b"frag", fin=False))
    ws.send(client_frame(PING, b"mid"))
    ws.send(client_frame(CONTINUATION, b"men", fin=False))
    ws.send(client_frame(CONTINUATION, b"ted"))
    pong = ws.recv_frame()
    assert (pong.opcode, pong.payload) == (PONG, b"mid")
    assert ws.recv_message() == (TEXT, b"fragmented")


def test_empty_fragments_make_an_empty_message(ws: RawWebSocket) -> None:
    ws.send(client_frame(BINARY, b"", fin=False) + client_frame(CONTINUATION, b""))
    assert ws.recv_message() == (BINARY, b"")


@pytest.mark.parametrize(
    "frames",
    [
        [client_frame(CONTINUATION, b"orphan")],
        [client_frame(CONTINUATION, b"orphan", fin=False)],
        [client_frame(TEXT, b"a", fin=False), client_frame(TEXT, b"b")],
        [client_frame(TEXT, b"a", fin=False), client_frame(BINARY, b"b", fin=False)],
        [client_frame(TEXT, b"done"), client_frame(CONTINUATION, b"late")],
    ],
    ids=["continuation-first", "open-continuation-first", "text-inside-text",
         "binary-inside-text", "continuation-after-final"],
)  # fmt: skip
def test_fragmentation_rule_violations_fail_with_1002(
    ws: RawWebSocket, frames: list[bytes]
) -> None:
    ws.send(b"".join(frames))
    _fails_with(ws, 1002)


# -- UTF-8 (6.*) ----------------------------------------------------------------------------


def test_valid_utf8_split_inside_a_character_across_fragments_is_echoed(
    ws: RawWebSocket,
) -> None:
    text = "κόσμε 𝄞".encode()
    ws.send(client_frame(TEXT, text[:1], fin=False))
    for n in range(1, len(text) - 1):
        ws.send(client_frame(CONTINUATION, text[n : n + 1], fin=False))
    ws.send(client_frame(CONTINUATION, text[-1:]))
    assert ws.recv_message() == (TEXT, text)


@pytest.mark.parametrize(
    "payload",
    [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xce"],
    ids=["ff", "overlong", "surrogate", "over-max", "truncated"],
)
def test_invalid_utf8_in_a_text_message_fails_with_1007(ws: RawWebSocket, payload: bytes) -> None:
    ws.send(client_frame(TEXT, payload))
    _fails_with(ws, 1007)


def test_invalid_utf8_split_across_fragments_fails_with_1007(ws: RawWebSocket) -> None:
    ws.send(client_frame(TEXT, b"abc\xe2\x82", fin=False))  # the start of a valid sequence
    ws.send(client_frame(CONTINUATION, b"\x28rest"))  # ... that does not continue
    _fails_with(ws, 1007)


def test_invalid_utf8_fails_before_the_message_ends(ws: RawWebSocket) -> None:
    ws.send(client_frame(TEXT, b"\xce\xba\xf4\x90\x80\x80", fin=False))
    _fails_with(ws, 1007)  # no final frame was ever sent


# -- closing (7.*) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason"), [(1000, b""), (1000, b"bye"), (1001, b""), (3000, b"app"), (4999, b"")]
)
def test_client_close_is_echoed_with_its_code_then_tcp_ends(
    ws: RawWebSocket, code: int, reason: bytes
) -> None:
    ws.send(close_frame(code, reason))
    close = ws.expect_close()
    assert close.close_code == code
    assert ws.at_eof()


def test_empty_client_close_gets_an_empty_close_never_1005(ws: RawWebSocket) -> None:
    ws.send(close_frame())
    assert ws.expect_close().payload == b""
    assert ws.at_eof()


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
def test_close_codes_that_must_not_appear_on_the_wire_fail_with_1002(
    ws: RawWebSocket, code: int
) -> None:
    ws.send(close_frame(code))
    _fails_with(ws, 1002)


def test_close_with_a_one_byte_payload_fails_with_1002(ws: RawWebSocket) -> None:
    ws.send(client_frame(CLOSE, b"\x03"))
    _fails_with(ws, 1002)


def test_close_reason_that_is_not_utf8_fails_with_1007(ws: RawWebSocket) -> None:
    ws.send(close_frame(1000, b"\xff\xfe"))
    _fails_with(ws, 1007)


def test_nothing_after_a_close_is_answered(ws: RawWebSocket) -> None:
    ws.send(close_frame(1000) + client_frame(PING, b"late") + client_frame(TEXT, b"late"))
    frames = []
    while True:
        try:
            frames.append(ws.recv_frame())
        except EOFError:
            break
    assert [f.opcode for f in frames] == [CLOSE]


def test_message_sent_before_close_in_one_packet_is_echoed_first(ws: RawWebSocket) -> None:
    ws.send(client_frame(TEXT, b"last words") + close_frame(1000))
    assert ws.recv_message() == (TEXT, b"last words")
    assert ws.expect_close().close_code == 1000
