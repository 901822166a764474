"""HPACK encoding of a server's answers, with a cache of the blocks that repeat.

Each field goes out as the cheapest thing the tables allow: an index when the static or the
dynamic table holds the whole field; otherwise a literal that names the field by index when
a table holds its name, added to the dynamic table so that the next answer can index it.
Fields that carry secrets (`NEVER_INDEXED`) go out as never-indexed literals, so that no
intermediary stores them. Strings are Huffman-coded when that makes them shorter.

Answers repeat: the same status, content type, server and date (for a second) over and over.
Once every field of such an answer is in a table, its block adds nothing to the table, so the
same fields make the same bytes for as long as the table stays as it is. `encode` keeps such
blocks by their fields, stamped with the table's generation (which every change to the table
moves on), and answers a repeat with the stored bytes.

Entries are numbered as they are added; an entry's index is 62 plus the number of entries
added after it, so finding a field is one dictionary look-up, never a scan of the table.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from socketify.protocol.http2.hpack_static import (
    STATIC_FIELD_INDEX,
    STATIC_NAME_INDEX,
    STATIC_TABLE,
)
from socketify.protocol.http2.huffman import encode as huffman_encode
from socketify.protocol.http2.huffman import encoded_length

__all__ = ["NEVER_INDEXED", "Encoder", "encode_integer"]

NEVER_INDEXED = frozenset({b"authorization", b"proxy-authorization", b"set-cookie", b"cookie"})
_FIRST_DYNAMIC = len(STATIC_TABLE) + 1  # the dynamic table's first index
_CACHED_BLOCKS = 64  # distinct repeating answers one connection remembers
_CACHED_BLOCK_SIZE = 512  # larger blocks (long cookies, say) are encoded each time


def encode_integer(value: int, prefix_bits: int, pattern: int) -> bytes:
    """An HPACK integer with an N-bit prefix, the first byte's high bits set to `pattern`."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((pattern | value,))
    out = bytearray((pattern | limit,))
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(data: bytes) -> bytes:
    """A string literal: Huffman-coded when that is shorter."""
    if len(data) > 2 and encoded_length(data) < len(data):
        coded = huffman_encode(data)
        return encode_integer(len(coded), 7, 0x80) + coded
    return encode_integer(len(data), 7, 0) + data


class Encoder:
    """The encoding side of one connection's HPACK context."""

    __slots__ = (
        "_added",
        "_blocks",
        "_entries",
        "_fields",
        "_generation",
        "_names",
        "_pending_sizes",
        "_size",
        "table_size",
    )

    def __init__(self, table_size: int = 4096) -> None:
        self.table_size = table_size  # the bound our blocks keep to
        self._entries: deque[tuple[int, bytes, bytes, int]] = deque()  # (number, name, value, size)
        self._fields: dict[tuple[bytes, bytes], int] = {}  # field -> number of its newest entry
        self._names: dict[bytes, int] = {}  # name -> number of its newest entry
        self._added = 0  # entries ever added: the next one's number
        self._size = 0
        self._generation = 0  # moves on with every change to the table
        self._blocks: dict[tuple[tuple[bytes, bytes], ...], tuple[int, bytes]] = {}
        self._pending_sizes: list[int] = []  # size updates the next block must announce

    def set_table_size(self, limit: int) -> None:
        """The decoder's SETTINGS_HEADER_TABLE_SIZE changed: keep within `limit` from now on."""
        size = min(limit, 4096)
        if size == self.table_size and not self._pending_sizes:
            return
        self._pending_sizes.append(size)
        self.table_size = size
        self._evict(size)
        self._generation += 1

    def encode(self, fields: Sequence[tuple[bytes, bytes]]) -> bytes:
        """The header block of `fields`."""
        key = tuple(fields)
        cached = self._blocks.get(key)
        if cached is not None and cached[0] == self._generation and not self._pending_sizes:
            return cached[1]
        out = bytearray()
        if self._pending_sizes:
            # A decoder must see the smallest size the table went through, then the last.
            smallest, last = min(self._pending_sizes), self._pending_sizes[-1]
            out += encode_integer(smallest, 5, 0x20)
            if last != smallest:
                out += encode_integer(last, 5, 0x20)
            self._pending_sizes.clear()
        generation = self._generation
        for name, value in fields:
            out += self._field(name, value)
        block = bytes(out)
        if self._generation == generation and len(block) <= _CACHED_BLOCK_SIZE:
            if len(self._blocks) >= _CACHED_BLOCKS:
                self._blocks.clear()
            self._blocks[key] = (generation, block)
        return block

    def _field(self, name: bytes, value: bytes) -> bytes:
        field = (name, value)
        index = STATIC_FIELD_INDEX.get(field)
        if index is not None:
            return encode_integer(index, 7, 0x80)
        number = self._fields.get(field)
        if number is not None:
            return encode_integer(self._index(number), 7, 0x80)
        name_index = STATIC_NAME_INDEX.get(name)
        if name_index is None:
            number = self._names.get(name)
            if number is not None:
                name_index = self._index(number)
        if name in NEVER_INDEXED:
            head = encode_integer(name_index or 0, 4, 0x10)
        elif len(name) + len(value) + 32 > self.table_size:
            head = encode_integer(name_index or 0, 4, 0x00)
        else:
            head = encode_integer(name_index or 0, 6, 0x40)
            self._insert(name, value)
        if name_index:
            return head + _string(value)
        return head + _string(name) + _string(value)

    def _index(self, number: int) -> int:
        return _FIRST_DYNAMIC + self._added - 1 - number

    def _insert(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value) + 32
        self._evict(self.table_size - size)
        number = self._added
        self._added += 1
        self._entries.appendleft((number, name, value, size))
        self._fields[(name, value)] = number
        self._names[name] = number
        self._size += size
        self._generation += 1

    def _evict(self, bound: int) -> None:
        entries = self._entries
        while self._size > bound:
            number, name, value, size = entries.pop()
            self._size -= size
            if self._fields.get((name, value)) == number:
                del self._fields[(name, value)]
            if self._names.get(name) == number:
                del self._names[name]
            self._generation += 1
