"""Spark's Murmur3 `hash` in Python, so that a keyed fetch finds the buckets its keys hash to
without a Spark job: a part's bucket of a row is Spark's `pmod(hash(cluster columns), n)`
(see `source_store`), and `bucket_of` must agree with it bit for bit."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from pomoview.server.types import Value

_M32 = 0xFFFFFFFF
_SEED = 42  # Spark's seed for `hash` and for hash partitioning


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 = ((h1 ^ (h1 >> 16)) * 0x85EBCA6B) & _M32
    h1 = ((h1 ^ (h1 >> 13)) * 0xC2B2AE35) & _M32
    return h1 ^ (h1 >> 16)


def _hash_long(value: int, seed: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed, _mix_k1(value & _M32))
    return _fmix(_mix_h1(h1, _mix_k1(value >> 32)), 8)


def _hash_bytes(data: bytes, seed: int) -> int:
    # Murmur3_x86_32.hashUnsafeBytes: whole little-endian words, then each remaining byte as a
    # signed int of its own.
    aligned = len(data) - len(data) % 4
    h1 = seed
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h1 = _mix_h1(h1, _mix_k1(word))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & _M32))
    return _fmix(h1, len(data))


def _hash_value(value: Value, seed: int) -> int:
    if isinstance(value, bool):
        return _fmix(_mix_h1(seed, _mix_k1(int(value))), 4)  # hashInt(1 or 0)
    if isinstance(value, int):
        return _hash_long(value, seed)
    if isinstance(value, float):
        if value == 0.0:  # 0.0 and -0.0 alike
            return _hash_long(0, seed)
        if math.isnan(value):
            return _hash_long(0x7FF8000000000000, seed)  # Java's canonical NaN
        return _hash_long(struct.unpack("<q", struct.pack("<d", value))[0], seed)
    if isinstance(value, str):
        return _hash_bytes(value.encode("utf-8"), seed)
    return _hash_bytes(bytes(value), seed)


def spark_hash(values: Sequence[Value]) -> int:
    """Spark's `hash(values...)` (Murmur3, seed 42, chained over the columns), a signed int."""
    h = _SEED
    for value in values:
        h = _hash_value(value, h)
    return h - (1 << 32) if h >= 1 << 31 else h


def bucket_of(values: Sequence[Value], buckets: int) -> int:
    """Spark's `pmod(hash(values...), buckets)`."""
    return spark_hash(values) % buckets
