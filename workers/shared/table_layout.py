"""Where everything is in the shared table's memory: size classes, groups, slots, a key's place.

Size classes. Slots come in ``len(SLOT_DATA)`` sizes: 240 bytes of key and value (counters,
token buckets, small sessions), 1 088 (a session of up to 1 KiB) and 4 352 (a session of up
to 4 KiB with a key of up to 256 bytes). Each class is a region of *groups* of
``GROUP_SLOTS`` slots, and a key has one group in every class: its hash picks a group
number (modulo the class's group count, a power of two) and a *first* slot in it, the same
in every class. The key's lock is the group number modulo the stripe count; as every group
count is a power of two at least the stripe count, the keys of any one group of any class
share their lock.

Layout: a header (word 0: some group has spilled; from ``MUTEXES_AT`` one ``MUTEX_BYTES``
mutex per stripe; from ``USED_AT`` one byte per group of every class, set once the group
held a key), then each class's groups, page-aligned. A group is its sequence word, its
``spilled`` word, ``GROUP_SLOTS`` tag words (0: never used, ``TOMB``: removed, odd: the hash
of the key there), then the slots. A slot is its control word (which half is current) and
two halves; a half is ``HALF_HEAD`` (``expires:f64 kind:u8 key_len:u8 value_len:u16
written:f32``), then the key and the value, at most the class's ``SLOT_DATA`` bytes.

The hash is Python's own: every process that maps the table is a fork of the one that made
it, so all share the seed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from workers.shared.mutex import MUTEX_BYTES

__all__ = [
    "DEFAULT_GROUPS",
    "GROUP_HEAD",
    "GROUP_SLOTS",
    "HALF_HEAD",
    "KEY_AT",
    "LAST",
    "MAX_KEY",
    "MAX_STRIPES",
    "MUTEXES_AT",
    "SLOT_DATA",
    "TAG_MASK",
    "TOMB",
    "Entry",
    "Layout",
    "Place",
    "SizeClass",
    "Stored",
    "groups_for",
    "head_and_key",
]

GROUP_SLOTS = 16
SLOT_DATA = (240, 1088, 4352)  # key + value bytes a slot holds, per size class
MAX_KEY = 255  # a half stores the key length in one byte
# 102 MiB of address space: 65 536 small slots, 16 384 of 1 KiB, 4 096 of 4 KiB.
# Pages count (in every process that touches them) only once used.
DEFAULT_GROUPS = (4096, 1024, 256)
MAX_STRIPES = 256
MUTEXES_AT = 64
USED_AT = MUTEXES_AT + MAX_STRIPES * MUTEX_BYTES
HALF_HEAD = struct.Struct("<dBBHf")  # expires, kind, key length, value length, written
KEY_AT = HALF_HEAD.size
GROUP_HEAD = 16 + 8 * GROUP_SLOTS  # seq, spilled, tags
LAST = GROUP_SLOTS - 1
TOMB = 2  # a removed key's tag (live tags are odd, free ones 0)
TAG_MASK = (1 << 64) - 1
_PAGE = 4096


class Entry(NamedTuple):
    """One key's entry as read from its slot."""

    size_class: int  # which class of slots it is in
    slot: int  # its slot in its group
    kind: int  # the caller's tag for what the value is
    expires: float  # on the caller's clock; ``inf`` for none
    value: bytes


class Stored(NamedTuple):
    """A key as a scan of the whole table sees it."""

    key: bytes
    kind: int
    expires: float


@dataclass(frozen=True, slots=True)
class Place:
    """Where a key goes, computed once (``SharedTable.place``) for a caller to keep."""

    key: bytes
    tag: int  # the key's hash, made odd: what its slot's tag word holds
    first: int  # the slot of each of its groups where probing starts
    stripe: int  # the lock of its groups
    seqs: tuple[int, ...]  # the word index of its group's sequence word, per size class
    homes: tuple[int, ...]  # the byte offset of its slot ``first``, per size class
    head: struct.Struct  # a half's head then this key: read or written in one call


@dataclass(frozen=True)
class SizeClass:
    """One size class: its slot size and where its groups are."""

    data: int  # key + value bytes a half holds
    groups: int
    start: int  # byte offset of its first group
    used: int  # byte offset of its groups' used bytes
    half: int
    slot: int
    group: int  # bytes per group

    def seq_at(self, group: int) -> int:
        """The word index of ``group``'s sequence word."""
        return (self.start + group * self.group) >> 3


class Layout:
    """The offsets of a table with ``groups`` groups per class and ``stripes`` locks."""

    def __init__(self, groups: Sequence[int], stripes: int) -> None:
        if len(groups) != len(SLOT_DATA):
            raise ValueError(f"give a group count for each of the {len(SLOT_DATA)} size classes")
        if any(count < 1 or count & (count - 1) for count in groups):
            raise ValueError("group counts must be powers of two")
        if not 1 <= stripes <= MAX_STRIPES or stripes & (stripes - 1):
            raise ValueError(f"stripes must be a power of two up to {MAX_STRIPES}")
        self.stripes = min(stripes, *groups)
        classes = []
        used = USED_AT
        start = _round_up(USED_AT + sum(groups), _PAGE)
        for data, count in zip(SLOT_DATA, groups, strict=True):
            half = KEY_AT + data
            group = _group_bytes(data)
            classes.append(SizeClass(data, count, start, used, half, 8 + 2 * half, group))
            used += count
            start = _round_up(start + count * group, _PAGE)
        self.classes = tuple(classes)
        self.size = start

    def place(self, key: bytes) -> Place:
        """Where ``key`` goes: its groups, first slot and lock."""
        code = hash(key) & TAG_MASK
        number = code >> 4
        first = code & LAST
        groups = [c.start + (number & (c.groups - 1)) * c.group for c in self.classes]
        homes = tuple(
            at + GROUP_HEAD + first * c.slot for at, c in zip(groups, self.classes, strict=True)
        )
        seqs = tuple(at >> 3 for at in groups)
        stripe = number & (self.stripes - 1)
        return Place(key, code | 1, first, stripe, seqs, homes, head_and_key(len(key)))

    def spilled_word(self, key: bytes) -> int:
        """The word index of the ``spilled`` word of ``key``'s class-0 group (what ``place``
        gives as ``seqs[0] + 1``, without the rest)."""
        first = self.classes[0]
        return first.seq_at(((hash(key) & TAG_MASK) >> 4) & (first.groups - 1)) + 1

    def first_slot(self, key: bytes) -> int:
        """The slot of its groups where ``key``'s probing starts."""
        return hash(key) & LAST

    def group_number(self, size_class: int, seq_at: int) -> int:
        """Which group of its class the group whose sequence word is ``seq_at`` is."""
        layout = self.classes[size_class]
        return ((seq_at << 3) - layout.start) // layout.group


def groups_for(megabytes: float) -> tuple[int, ...]:
    """Group counts per size class for a table of about ``megabytes`` MiB: each class gets
    the share of the bytes it has by default, rounded down to a power of two groups (at
    least one)."""
    if not megabytes > 0:
        raise ValueError("the table size must be a positive number of MiB")
    default = [
        count * _group_bytes(data) for count, data in zip(DEFAULT_GROUPS, SLOT_DATA, strict=True)
    ]
    counts = []
    for data, share in zip(SLOT_DATA, default, strict=True):
        fit = int(megabytes * (1 << 20) * share / sum(default) // _group_bytes(data))
        counts.append(1 << max(0, fit.bit_length() - 1))
    return tuple(counts)


_HEADS: dict[int, struct.Struct] = {}


def head_and_key(key_len: int) -> struct.Struct:
    """The layout of a half's head followed by a key of ``key_len`` bytes."""
    head = _HEADS.get(key_len)
    if head is None:
        head = _HEADS[key_len] = struct.Struct(f"{HALF_HEAD.format}{key_len}s")
    return head


def _group_bytes(data: int) -> int:
    return GROUP_HEAD + GROUP_SLOTS * (8 + 2 * (KEY_AT + data))


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step
