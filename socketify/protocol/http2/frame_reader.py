"""The inbound framing layer: a client's bytes cut into whole frames and whole header blocks.

`FrameReader.frames` takes the next bytes from the socket and yields every frame they
complete as a plain tuple `(type, flags, stream id, payload)`; the start of a frame that is not
whole yet waits for the next bytes. On the way it keeps the rules that are about framing, not
about streams, and raises `Http2Error` for the first one broken:

- the bytes must open with the client connection preface (PROTOCOL_ERROR), and the first
  frame after it must be SETTINGS (PROTOCOL_ERROR);
- no frame may be longer than our SETTINGS_MAX_FRAME_SIZE (FRAME_SIZE_ERROR), refused as soon
  as its header says so, before its payload is buffered;
- frames that cost work but carry no request (RST_STREAM, SETTINGS and PING, which must be
  acted on or answered; PRIORITY, WINDOW_UPDATE, empty DATA, unknown types) are charged to
  their per-second budgets (`limits.FrameBudgets`) as they come, and a flood of them is
  refused (ENHANCE_YOUR_CALM) before any of it is handled;
- a header block is one HEADERS frame and the CONTINUATION frames of the same stream that
  follow it, with nothing else in between (PROTOCOL_ERROR); a CONTINUATION anywhere else is
  one too. The block is bounded in bytes (ENHANCE_YOUR_CALM) as its frames arrive, so a
  client cannot park megabytes of CONTINUATION frames that no header-list limit sees yet.

A header block comes out whole, as one HEADERS tuple whose flags say END_HEADERS and whose
payload is the block itself: padding and the priority fields taken off (a stream that names
itself as its dependency is a PROTOCOL_ERROR).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from socketify.protocol.http2.frames import (
    END_HEADERS,
    PREFACE,
    ErrorCode,
    FrameType,
    Http2Error,
    headers_fragment,
    read_header,
)
from socketify.protocol.http2.limits import FrameBudgets

__all__ = ["Frame", "FrameReader"]

Frame = tuple[int, int, int, bytes]  # (type, flags, stream id, payload)

_HEADERS, _CONTINUATION, _SETTINGS = FrameType.HEADERS, FrameType.CONTINUATION, FrameType.SETTINGS


class FrameReader:
    """Cuts one connection's inbound bytes into frames and header blocks."""

    __slots__ = (
        "_block",
        "_block_flags",
        "_block_stream",
        "_budgets",
        "_first_frame",
        "_pending",
        "_preface_left",
        "block_limit",
        "frame_limit",
    )

    def __init__(
        self, frame_limit: int, block_limit: int, budgets: FrameBudgets | None = None
    ) -> None:
        self.frame_limit = frame_limit  # our SETTINGS_MAX_FRAME_SIZE
        self.block_limit = block_limit  # bytes of one header block
        self._budgets = budgets
        self._preface_left = len(PREFACE)
        self._first_frame = True
        self._pending = b""  # the start of a frame not whole yet
        self._block: bytearray | None = None  # a header block awaiting CONTINUATION frames
        self._block_stream = 0
        self._block_flags = 0

    def frames(self, data: bytes) -> Iterator[Frame]:
        """The frames `data` completes, in order; Http2Error at the first broken rule."""
        if self._preface_left:
            data = self._check_preface(data)
        if self._pending:
            data = self._pending + data
            self._pending = b""
        size = len(data)
        pos = 0
        budgets = self._budgets
        now = time.monotonic()
        while size - pos >= 9:
            length, kind, flags, stream_id = read_header(data, pos)
            if length > self.frame_limit:
                raise Http2Error(ErrorCode.FRAME_SIZE_ERROR, f"a frame of {length} bytes")
            if self._first_frame:
                if kind != _SETTINGS:
                    raise Http2Error(
                        ErrorCode.PROTOCOL_ERROR, "the preface is not followed by SETTINGS"
                    )
                self._first_frame = False
            end = pos + 9 + length
            if end > size:
                if kind == _CONTINUATION and self._block is not None:
                    self._check_block_size(len(self._block) + length)
                break
            if budgets is not None:
                flood = budgets.charge(kind, length, flags, now)
                if flood is not None:
                    raise Http2Error(ErrorCode.ENHANCE_YOUR_CALM, flood)
            payload = data[pos + 9 : end]
            pos = end
            if self._block is not None:
                whole = self._continuation(kind, flags, stream_id, payload)
                if whole is not None:
                    yield whole
            elif kind == _HEADERS:
                whole = self._headers(flags, stream_id, payload)
                if whole is not None:
                    yield whole
            elif kind == _CONTINUATION:
                raise Http2Error(ErrorCode.PROTOCOL_ERROR, "CONTINUATION outside a header block")
            else:
                yield kind, flags, stream_id, payload
        if pos < size:
            self._pending = data[pos:]

    def _check_preface(self, data: bytes) -> bytes:
        done = len(PREFACE) - self._preface_left
        expected = PREFACE[done : done + len(data)]
        if data[: len(expected)] != expected:
            raise Http2Error(ErrorCode.PROTOCOL_ERROR, "not the HTTP/2 connection preface")
        self._preface_left -= len(expected)
        return data[len(expected) :]

    def _headers(self, flags: int, sid: int, payload: bytes) -> Frame | None:
        if not sid:
            raise Http2Error(ErrorCode.PROTOCOL_ERROR, "HEADERS on stream 0")
        fragment, depends_on = headers_fragment(flags, payload)
        if depends_on == sid:
            raise Http2Error(ErrorCode.PROTOCOL_ERROR, f"stream {sid} depends on itself")
        self._check_block_size(len(fragment))
        if flags & END_HEADERS:
            return _HEADERS, flags, sid, fragment
        self._block = bytearray(fragment)
        self._block_stream = sid
        self._block_flags = flags | END_HEADERS
        return None

    def _continuation(self, kind: int, flags: int, sid: int, payload: bytes) -> Frame | None:
        block = self._block
        assert block is not None
        if kind != _CONTINUATION or sid != self._block_stream:
            raise Http2Error(ErrorCode.PROTOCOL_ERROR, "a frame inside a header block")
        self._check_block_size(len(block) + len(payload))
        block += payload
        if not flags & END_HEADERS:
            return None
        self._block = None
        return _HEADERS, self._block_flags, sid, bytes(block)

    def _check_block_size(self, size: int) -> None:
        if size > self.block_limit:
            raise Http2Error(
                ErrorCode.ENHANCE_YOUR_CALM, f"header block over {self.block_limit} bytes"
            )
