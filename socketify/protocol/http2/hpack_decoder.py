"""HPACK decoding: one connection's header blocks into header lists, the dynamic table kept.

A block is a sequence of representations: an indexed field (first bit 1), a literal with
incremental indexing (01), a dynamic table size update (001, only before the first field),
and literals without indexing (0000) or never indexed (0001). Integers have an N-bit prefix
and continue in 7-bit groups; strings carry a Huffman bit and a 7-bit-prefix length.

Anything the decoder cannot make sense of leaves the connection's table in an unknown state:
`CompressionError`, a connection error of type COMPRESSION_ERROR. A list whose size (each
field's name and value plus 32, as SETTINGS_MAX_HEADER_LIST_SIZE counts) passes the bound is
`HeaderListTooLarge`; the decoder stops collecting it at once, before it grows any further.

Requests repeat: a client sends the same block for the same request once the fields it
indexes are in the table (a literal it does not index, as most do with `:path`, repeats
too). A block that changed nothing in the table decodes the same for as long as the table
stays as it is, so `decode` keeps such blocks by their bytes, stamped with the table's
generation (which every change to the table moves on), and answers a repeat with the list
it decoded before.
"""

from __future__ import annotations

from collections import deque

from socketify.protocol.http2.hpack_static import STATIC_TABLE
from socketify.protocol.http2.huffman import HuffmanError
from socketify.protocol.http2.huffman import decode as huffman_decode

__all__ = ["CompressionError", "Decoder", "HeaderList", "HeaderListTooLarge", "entry_size"]

_STATIC = (None, *STATIC_TABLE)  # indexed from 1
_STATIC_COUNT = len(STATIC_TABLE)
_MAX_INTEGER_BYTES = 5  # continuation bytes of an integer: enough for any 32-bit value
_CACHED_BLOCKS = 64  # distinct repeating requests one connection remembers
_CACHED_BLOCK_SIZE = 512  # larger blocks are not kept: a client must not park memory here

HeaderList = tuple[tuple[bytes, bytes], ...]


class CompressionError(Exception):
    """A header block that cannot be decoded: the connection's compression state is lost."""


class HeaderListTooLarge(Exception):
    """A header list over the decoder's bound."""


def entry_size(name: bytes, value: bytes) -> int:
    """What one field counts in a dynamic table and in a header list's size."""
    return len(name) + len(value) + 32


class Decoder:
    """The decoding side of one connection's HPACK context."""

    __slots__ = (
        "_blocks",
        "_entries",
        "_generation",
        "_size",
        "max_header_list_size",
        "max_table_size",
        "table_size",
    )

    def __init__(self, max_table_size: int = 4096, max_header_list_size: int = 1 << 16) -> None:
        self.max_table_size = max_table_size  # what we advertised (SETTINGS_HEADER_TABLE_SIZE)
        self.table_size = max_table_size  # the bound the encoder chose, up to max_table_size
        self.max_header_list_size = max_header_list_size
        self._entries: deque[tuple[bytes, bytes]] = deque()  # newest first
        self._size = 0
        self._generation = 0  # moves on with every change to the table
        self._blocks: dict[bytes, tuple[int, HeaderList]] = {}

    def decode(self, block: bytes | memoryview) -> HeaderList:
        """The header list of one complete header block."""
        data = bytes(block)
        cached = self._blocks.get(data)
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        generation = self._generation
        fields = self._decode(data)
        if self._generation == generation and len(data) <= _CACHED_BLOCK_SIZE:
            if len(self._blocks) >= _CACHED_BLOCKS:
                self._blocks.clear()
            self._blocks[data] = (generation, fields)
        return fields

    def _decode(self, data: bytes) -> HeaderList:
        end = len(data)
        pos = 0
        fields: list[tuple[bytes, bytes]] = []
        list_size = 0
        limit = self.max_header_list_size
        try:
            while pos < end:
                first = data[pos]
                if first & 0x80:
                    index, pos = _integer(data, pos, 0x7F)
                    name, value = self._field(index)
                elif first & 0x40:
                    name, value, pos = self._literal(data, pos, 0x3F)
                    self._insert(name, value)
                elif first & 0x20:
                    if fields:
                        raise CompressionError("a table size update after the first field")
                    size, pos = _integer(data, pos, 0x1F)
                    if size > self.max_table_size:
                        raise CompressionError(f"a table size update to {size} bytes")
                    self.table_size = size
                    self._generation += 1
                    self._evict(size)
                    continue
                else:
                    name, value, pos = self._literal(data, pos, 0x0F)
                list_size += len(name) + len(value) + 32
                if list_size > limit:
                    raise HeaderListTooLarge(f"a header list over {limit} bytes")
                fields.append((name, value))
        except (IndexError, HuffmanError) as exc:
            raise CompressionError(f"undecodable header block: {exc}") from None
        return tuple(fields)

    def _field(self, index: int) -> tuple[bytes, bytes]:
        if index <= _STATIC_COUNT:
            if not index:
                raise CompressionError("index 0")
            return _STATIC[index]  # type: ignore[return-value]
        try:
            return self._entries[index - _STATIC_COUNT - 1]
        except IndexError:
            raise CompressionError(f"index {index} is past the tables") from None

    def _literal(self, data: bytes, pos: int, prefix: int) -> tuple[bytes, bytes, int]:
        index, pos = _integer(data, pos, prefix)
        if index:
            name = self._field(index)[0]
        else:
            name, pos = _string(data, pos)
        value, pos = _string(data, pos)
        return name, value, pos

    def _insert(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value) + 32
        if size > self.table_size:
            # An entry larger than the table empties it and is not added.
            self._entries.clear()
            self._size = 0
            self._generation += 1
            return
        self._evict(self.table_size - size)
        self._entries.appendleft((name, value))
        self._size += size
        self._generation += 1

    def _evict(self, bound: int) -> None:
        entries = self._entries
        while self._size > bound:
            name, value = entries.pop()
            self._size -= len(name) + len(value) + 32


def _integer(data: bytes, pos: int, prefix: int) -> tuple[int, int]:
    """An integer whose first byte holds `prefix` (a mask of its low bits), and the next pos."""
    value = data[pos] & prefix
    pos += 1
    if value < prefix:
        return value, pos
    shift = 0
    for _ in range(_MAX_INTEGER_BYTES):
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise CompressionError("an integer longer than 32 bits")


def _string(data: bytes, pos: int) -> tuple[bytes, int]:
    """A string literal (Huffman-coded or not), and the next pos."""
    huffman = data[pos] & 0x80
    length, pos = _integer(data, pos, 0x7F)
    end = pos + length
    if end > len(data):
        raise CompressionError("a string longer than its header block")
    if huffman:
        return huffman_decode(data[pos:end]), end
    return data[pos:end], end
