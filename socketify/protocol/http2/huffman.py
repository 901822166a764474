"""HPACK's Huffman code, both ways, driven by tables built once from `huffman_table`.

Encoding appends each symbol's code to one integer and pads the last byte with the high bits
of EOS (all ones). Decoding walks the code tree four bits at a time: the tree's inner nodes
are the states of a small machine, and `_DECODE[state * 16 + nibble]` says where four more bits
lead and which symbol, if any, they complete. A string ends well only on the root or on a
path of at most seven one-bits (the padding); a code for EOS inside a string is an error.
"""

from __future__ import annotations

from socketify.protocol.http2.huffman_table import EOS, HUFFMAN_CODE

__all__ = ["HuffmanError", "decode", "encode", "encoded_length"]


class HuffmanError(ValueError):
    """A Huffman-coded string that no encoder could have made."""


_NO_SYMBOL = -1
_FAILED = -1  # the next state of a transition that decodes EOS


def _build_tree() -> list[list[int]]:
    """The code tree as inner nodes: node[bit] is a child node's index, or ~symbol."""
    nodes: list[list[int]] = [[0, 0]]
    for symbol, (code, bits) in enumerate(HUFFMAN_CODE):
        node = 0
        for shift in range(bits - 1, -1, -1):
            bit = (code >> shift) & 1
            if shift == 0:
                nodes[node][bit] = ~symbol
            elif nodes[node][bit] == 0:
                nodes.append([0, 0])
                nodes[node][bit] = len(nodes) - 1
                node = len(nodes) - 1
            else:
                node = nodes[node][bit]
    return nodes


def _build_decoder() -> tuple[tuple[tuple[int, int], ...], frozenset[int]]:
    """The four-bit transitions, and the states a string may end in."""
    nodes = _build_tree()
    transitions: list[tuple[int, int]] = []
    for state in range(len(nodes)):
        for nibble in range(16):
            node, symbol = state, _NO_SYMBOL
            for shift in (3, 2, 1, 0):
                child = nodes[node][(nibble >> shift) & 1]
                if child < 0:
                    if ~child == EOS:
                        node = _FAILED
                        break
                    symbol, node = ~child, 0
                else:
                    node = child
            transitions.append((node, symbol))
    # A state ends a string well when it is the root or lies on the all-ones path (the
    # padding) at most seven bits deep.
    accepting = {0}
    node = 0
    for _depth in range(7):
        node = nodes[node][1]
        accepting.add(node)
    return tuple(transitions), frozenset(accepting)


_DECODE, _ACCEPTING = _build_decoder()
_CODES = tuple(code for code, _bits in HUFFMAN_CODE[:EOS])
_BITS = tuple(bits for _code, bits in HUFFMAN_CODE[:EOS])


def encoded_length(data: bytes) -> int:
    """Bytes the Huffman code of `data` takes, padding included."""
    bits = _BITS
    return (sum(bits[byte] for byte in data) + 7) >> 3


def encode(data: bytes) -> bytes:
    """The Huffman code of `data`, padded to a whole byte with ones."""
    codes, bits = _CODES, _BITS
    value = total = 0
    for byte in data:
        size = bits[byte]
        value = (value << size) | codes[byte]
        total += size
    pad = -total % 8
    value = (value << pad) | ((1 << pad) - 1)
    return value.to_bytes((total + pad) >> 3, "big")


def decode(data: bytes | memoryview) -> bytes:
    """The string a Huffman code stands for; HuffmanError for a code no encoder makes."""
    table = _DECODE
    out = bytearray()
    state = 0
    for byte in data:
        state, symbol = table[(state << 4) | (byte >> 4)]
        if state < 0:
            raise HuffmanError("EOS inside a Huffman-coded string")
        if symbol >= 0:
            out.append(symbol)
        state, symbol = table[(state << 4) | (byte & 0x0F)]
        if state < 0:
            raise HuffmanError("EOS inside a Huffman-coded string")
        if symbol >= 0:
            out.append(symbol)
    if state not in _ACCEPTING:
        raise HuffmanError("Huffman padding that is not a prefix of EOS")
    return bytes(out)
