"""Calldata read exactly as the contracts read it (docs/protocol.md "Transcript mode v2.1: canonical reading").

A counterparty's transaction is hostile input, and what decides what it means is the Solidity decoder that ran it,
not eth_abi's. eth_abi (strict, web3's `decode_function_input`) refuses bytes that Solidity accepts: a non-zero
padding byte after a `bytes` value (`NonEmptyPaddingBytes`), a last value without its padding, an offset that points
into a head or, for a member of a calldata struct, backwards (Solidity reads member offsets as signed). A pair that
settles a rule-breaking transcript with one such byte would leave every reader blind, and a force carrying one
would leave the forced party unable to answer. This module is the one reader of the node's calldata: it follows the
generated code of solc 0.8 (ABI coder v2, calldata parameters) step by step.

* A top-level dynamic argument sits at 4 + its offset (an offset above 2^64 - 1 reverts there).
* A dynamic member of a calldata struct sits at the struct's start + its offset modulo 2^256 (`access_calldata_tail`
  compares it with `slt`: a "negative" offset points before the struct, and Solidity follows it).
* A `bytes` or array is its length word, then its items; whatever follows them (padding, junk, other values it
  overlaps) is never read. Reads past the end of calldata are zeros, as `calldataload` gives.
* A value type keeps its low bits (what Solidity's cleanup keeps; where it validates instead, dirty bits revert,
  so no mined transaction has them).

What the contract refuses never mined, so the bounds checks here are only those that keep a reader safe (a length
past the end of the data is a CalldataError). tests/test_transcript_calldata.py fuzzes this against the contract:
every calldata the contract accepts decodes here to what Solidity itself re-encodes from it.
"""

from __future__ import annotations

import re

from eth_utils import function_abi_to_4byte_selector, to_checksum_address

WORD = 32
_WRAP = 1 << 256
_ARRAY = re.compile(r"^(.*)\[(\d*)\]$")


class CalldataError(ValueError):
    """Calldata that no contract call could have accepted (an unknown selector, a length past the end)."""


def function_of(contract, data: bytes) -> dict:
    """The ABI entry of `contract`'s function whose selector `data` starts with."""
    selector = bytes(data[:4])
    for entry in contract.abi:
        if entry.get("type") == "function" and function_abi_to_4byte_selector(entry) == selector:
            return entry
    raise CalldataError(f"no function of {contract.address} has selector 0x{selector.hex()}")


def decode_call(contract, data) -> tuple[str, dict]:
    """(function name, {argument: value}) of a call into `contract`, read as Solidity reads it. Tuples come back
    as dicts by member name, arrays as lists, `bytes` as bytes, addresses checksummed."""
    data = bytes(data)
    fn = function_of(contract, data)
    return fn["name"], _Reader(data).tuple(fn["inputs"], 4, top=True)


def decode_args(inputs: list[dict], data) -> dict:
    """`inputs` (an ABI entry's) read from calldata `data` that starts with a 4-byte selector."""
    return _Reader(bytes(data)).tuple(inputs, 4, top=True)


def _is_dynamic(abi: dict) -> bool:
    typ = abi["type"]
    if typ in ("bytes", "string"):
        return True
    m = _ARRAY.match(typ)
    if m:
        return not m.group(2) or _is_dynamic({**abi, "type": m.group(1)})
    if typ == "tuple":
        return any(_is_dynamic(c) for c in abi["components"])
    return False


def _head_size(abi: dict) -> int:
    """The bytes a value takes in its parent's head: a word for a dynamic one, else its static size."""
    if _is_dynamic(abi):
        return WORD
    m = _ARRAY.match(abi["type"])
    if m:
        return int(m.group(2)) * _head_size({**abi, "type": m.group(1)})
    if abi["type"] == "tuple":
        return sum(_head_size(c) for c in abi["components"])
    return WORD


class _Reader:
    def __init__(self, data: bytes):
        self.data = data

    def word(self, at: int) -> int:
        chunk = self.data[at : at + WORD] if at < len(self.data) else b""
        return int.from_bytes(chunk.ljust(WORD, b"\0"), "big")

    def tuple(self, components: list[dict], base: int, top: bool = False) -> dict:
        out, head = {}, 0
        for i, c in enumerate(components):
            name = c.get("name") or str(i)
            if _is_dynamic(c):
                offset = self.word(base + head)
                if top and offset >= 1 << 64:
                    raise CalldataError(f"argument {name}: offset {offset} is past what Solidity accepts")
                out[name] = self.tail(c, (base + offset) % _WRAP)
            else:
                out[name] = self.inline(c, base + head)
            head += _head_size(c)
        return out

    def tail(self, abi: dict, at: int):
        """A dynamic value whose encoding starts at `at` (its length word, or a dynamic tuple's head)."""
        typ = abi["type"]
        if typ == "tuple":
            return self.tuple(abi["components"], at)
        m = _ARRAY.match(typ)
        if m and m.group(2):  # a fixed-size array of dynamic items: a head of offsets at `at`
            return self.items({**abi, "type": m.group(1)}, at, int(m.group(2)))
        length = self.word(at)
        if length > len(self.data):
            raise CalldataError(f"a {typ} of length {length} in {len(self.data)} bytes of calldata")
        if typ in ("bytes", "string"):
            raw = self.data[at + WORD : at + WORD + length]
            if len(raw) < length:
                raise CalldataError(f"a {typ} of length {length} runs past the end of the calldata")
            return raw if typ == "bytes" else raw.decode("utf-8", errors="replace")
        return self.items({**abi, "type": m.group(1)}, at + WORD, length)

    def items(self, item: dict, at: int, n: int) -> list:
        if _is_dynamic(item):  # offsets relative to the items' start, as a struct member's
            return [self.tail(item, (at + self.word(at + i * WORD)) % _WRAP) for i in range(n)]
        size = _head_size(item)
        if at + n * size > len(self.data) + WORD:
            raise CalldataError(f"{n} items of {size} bytes run past the end of the calldata")
        return [self.inline(item, at + i * size) for i in range(n)]

    def inline(self, abi: dict, at: int):
        """A static value at `at`."""
        typ = abi["type"]
        if typ == "tuple":
            return self.tuple(abi["components"], at)
        m = _ARRAY.match(typ)
        if m:
            return self.items({**abi, "type": m.group(1)}, at, int(m.group(2)))
        return _value(typ, self.word(at))


def _value(typ: str, word: int):
    if typ.startswith("uint"):
        bits = int(typ[4:] or 256)
        return word & ((1 << bits) - 1)
    if typ.startswith("int"):
        bits = int(typ[3:] or 256)
        low = word & ((1 << bits) - 1)
        return low - (1 << bits) if low >> (bits - 1) else low
    if typ == "bool":
        return word != 0
    if typ == "address":
        return to_checksum_address((word & ((1 << 160) - 1)).to_bytes(20, "big"))
    if typ.startswith("bytes"):
        return word.to_bytes(WORD, "big")[: int(typ[5:])]
    raise CalldataError(f"no reader for ABI type {typ}")
