"""HPACK's static table: the 61 fields every header block may name by index (RFC 7541 Appendix A).

Index 1 is the first entry; the dynamic table's entries follow from index 62 on.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["STATIC_FIELD_INDEX", "STATIC_NAME_INDEX", "STATIC_TABLE"]

STATIC_TABLE: tuple[tuple[bytes, bytes], ...] = (
    (b":authority", b""),  # 1
    (b":method", b"GET"),  # 2
    (b":method", b"POST"),  # 3
    (b":path", b"/"),  # 4
    (b":path", b"/index.html"),  # 5
    (b":scheme", b"http"),  # 6
    (b":scheme", b"https"),  # 7
    (b":status", b"200"),  # 8
    (b":status", b"204"),  # 9
    (b":status", b"206"),  # 10
    (b":status", b"304"),  # 11
    (b":status", b"400"),  # 12
    (b":status", b"404"),  # 13
    (b":status", b"500"),  # 14
    (b"accept-charset", b""),  # 15
    (b"accept-encoding", b"gzip, deflate"),  # 16
    (b"accept-language", b""),  # 17
    (b"accept-ranges", b""),  # 18
    (b"accept", b""),  # 19
    (b"access-control-allow-origin", b""),  # 20
    (b"age", b""),  # 21
    (b"allow", b""),  # 22
    (b"authorization", b""),  # 23
    (b"cache-control", b""),  # 24
    (b"content-disposition", b""),  # 25
    (b"content-encoding", b""),  # 26
    (b"content-language", b""),  # 27
    (b"content-length", b""),  # 28
    (b"content-location", b""),  # 29
    (b"content-range", b""),  # 30
    (b"content-type", b""),  # 31
    (b"cookie", b""),  # 32
    (b"date", b""),  # 33
    (b"etag", b""),  # 34
    (b"expect", b""),  # 35
    (b"expires", b""),  # 36
    (b"from", b""),  # 37
    (b"host", b""),  # 38
    (b"if-match", b""),  # 39
    (b"if-modified-since", b""),  # 40
    (b"if-none-match", b""),  # 41
    (b"if-range", b""),  # 42
    (b"if-unmodified-since", b""),  # 43
    (b"last-modified", b""),  # 44
    (b"link", b""),  # 45
    (b"location", b""),  # 46
    (b"max-forwards", b""),  # 47
    (b"proxy-authenticate", b""),  # 48
    (b"proxy-authorization", b""),  # 49
    (b"range", b""),  # 50
    (b"referer", b""),  # 51
    (b"refresh", b""),  # 52
    (b"retry-after", b""),  # 53
    (b"server", b""),  # 54
    (b"set-cookie", b""),  # 55
    (b"strict-transport-security", b""),  # 56
    (b"transfer-encoding", b""),  # 57
    (b"user-agent", b""),  # 58
    (b"vary", b""),  # 59
    (b"via", b""),  # 60
    (b"www-authenticate", b""),  # 61
)


def _lowest_indexes() -> tuple[dict[tuple[bytes, bytes], int], dict[bytes, int]]:
    fields: dict[tuple[bytes, bytes], int] = {}
    names: dict[bytes, int] = {}
    for index, field in enumerate(STATIC_TABLE, 1):
        fields.setdefault(field, index)
        names.setdefault(field[0], index)
    return fields, names


# The lowest index of each field, and of each name, for the encoder (read-only).
_FIELDS, _NAMES = _lowest_indexes()
STATIC_FIELD_INDEX: Mapping[tuple[bytes, bytes], int] = MappingProxyType(_FIELDS)
STATIC_NAME_INDEX: Mapping[bytes, int] = MappingProxyType(_NAMES)
