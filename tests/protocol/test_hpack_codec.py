"""Our HPACK codec against the `hpack` library: each decodes what the other encodes.

Both directions run over sequences of header lists through one long-lived context, so the
dynamic tables of both sides must stay in step from block to block, with and without Huffman
coding and across table size changes. The decoder's refusals are checked on exact bytes.
"""

from __future__ import annotations

import hpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socketify.protocol.http2 import huffman
from socketify.protocol.http2.hpack_decoder import CompressionError, Decoder, HeaderListTooLarge
from socketify.protocol.http2.hpack_encoder import Encoder, encode_integer

# Names that repeat (so the tables get used), and arbitrary ones.
_COMMON = [b":status", b"content-type", b"date", b"server", b"set-cookie", b"x-trace", b"cookie"]
names = st.one_of(st.sampled_from(_COMMON), st.binary(min_size=1, max_size=40))
values = st.one_of(
    st.sampled_from([b"", b"200", b"text/plain", b"v" * 300]), st.binary(max_size=80)
)
header_lists = st.lists(st.tuples(names, values), max_size=12)
# Each step: a header list, and maybe a new table size announced before it.
steps = st.lists(
    st.tuples(header_lists, st.one_of(st.none(), st.sampled_from([0, 64, 256, 1024, 4096]))),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(steps=steps, use_huffman=st.booleans())
def test_we_decode_every_header_list_hpack_encodes(
    steps: list[tuple[list[tuple[bytes, bytes]], int | None]], use_huffman: bool
) -> None:
    theirs = hpack.Encoder()
    ours = Decoder(max_header_list_size=1 << 30)
    for fields, table_size in steps:
        if table_size is not None:
            theirs.header_table_size = table_size
        block = theirs.encode(fields, huffman=use_huffman)
        assert list(ours.decode(block)) == fields


@settings(max_examples=200, deadline=None)
@given(steps=steps)
def test_hpack_decodes_every_header_list_we_encode(
    steps: list[tuple[list[tuple[bytes, bytes]], int | None]],
) -> None:
    ours = Encoder()
    theirs = hpack.Decoder()
    theirs.max_header_list_size = 1 << 30
    for fields, table_size in steps:
        if table_size is not None:
            ours.set_table_size(table_size)
        assert theirs.decode(ours.encode(fields), raw=True) == fields
        # The same answer again, from the block cache when the table did not change.
        assert theirs.decode(ours.encode(fields), raw=True) == fields


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_huffman_round_trips_and_matches_hpack(data: bytes) -> None:
    coded = huffman.encode(data)
    assert huffman.decode(coded) == data
    assert len(coded) == huffman.encoded_length(data)
    block = hpack.Encoder().encode([(b"x", data)], huffman=True)
    assert Decoder().decode(block) == ((b"x", data),)


def test_a_repeated_answer_is_one_byte_per_field_and_comes_from_the_cache() -> None:
    encoder = Encoder()
    fields = [(b":status", b"200"), (b"content-type", b"text/plain"), (b"server", b"x")]
    first = encoder.encode(fields)
    second = encoder.encode(fields)
    assert len(second) == len(fields) < len(first)
    assert encoder.encode(fields) is second


def test_a_repeated_request_block_decodes_from_the_cache_until_the_table_changes() -> None:
    decoder = Decoder()
    encoder = hpack.Encoder()
    first = encoder.encode([(":method", "GET"), ("user-agent", "h2load")])
    repeat = encoder.encode([(":method", "GET"), ("user-agent", "h2load")])
    assert decoder.decode(first) == decoder.decode(repeat)
    assert decoder.decode(repeat) is decoder.decode(repeat)
    changed = encoder.encode([("x-new", "1")])
    assert decoder.decode(changed) == ((b"x-new", b"1"),)
    # The same bytes now name other entries: the cached list must not be reused.
    assert decoder.decode(repeat) != decoder.decode(first)


def test_large_blocks_are_not_kept_by_either_cache() -> None:
    block = b"\x00\x05x-big" + encode_integer(600, 7, 0) + b"v" * 600  # literal, not indexed
    decoder = Decoder()
    assert decoder.decode(block) is not decoder.decode(block)
    encoder = Encoder()
    fields = [(b"x-big", b"v" * 600)]
    encoder.encode(fields)  # the entry goes into the table
    assert encoder.encode(fields) is encoder.encode(fields)  # now one byte: kept
    huge = [(b"x-huge", b"w" * 5000)]  # over the table's size: a literal every time
    assert encoder.encode(huge) is not encoder.encode(huge)


def test_secrets_go_out_never_indexed() -> None:
    block = Encoder().encode([(b"set-cookie", b"session=1")])
    assert block[0] & 0xF0 == 0x10


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b"\x80", id="index-zero"),
        pytest.param(encode_integer(70, 7, 0x80), id="index-past-the-tables"),
        pytest.param(b"\x82" + encode_integer(0, 5, 0x20), id="size-update-after-a-field"),
        pytest.param(encode_integer(8192, 5, 0x20), id="size-update-over-the-setting"),
        pytest.param(b"\x00\x01x\x82\x1f\xff", id="huffman-padding-over-7-bits"),
        pytest.param(b"\x00\x01x\x84\xff\xff\xff\xff", id="huffman-eos"),
        pytest.param(b"\x00\x01x\x7f\x00", id="string-longer-than-block"),
        pytest.param(b"\x00\x01", id="block-ends-inside-a-field"),
        pytest.param(b"\xff\xff\xff\xff\xff\xff\xff\x01", id="integer-over-32-bits"),
    ],
)
def test_an_undecodable_block_is_a_compression_error(block: bytes) -> None:
    with pytest.raises(CompressionError):
        Decoder().decode(block)


def test_a_header_list_over_the_bound_is_refused() -> None:
    block = hpack.Encoder().encode([(b"x-big", b"v" * 2000)])
    with pytest.raises(HeaderListTooLarge):
        Decoder(max_header_list_size=1024).decode(block)
