"""Content ids of tuples (pomo_logic §2.2, DESIGN §2): `cid(relation, pairs) -> str`.

A CID is a CIDv1 (multiformats): the version 1, the multicodec `raw` (0x55),
and a sha2-256 multihash (0x12, 32 bytes) of the tuple's canonical encoding,
written in multibase base32 (RFC 4648 alphabet, lower case, no padding) with
its prefix `b`. It depends only on the relation name and the attribute/value
pairs, never on Python's `hash()` (salted per process), so equal tuples have
equal CIDs on every run and machine.

The canonical encoding (version tag, then length-prefixed parts):

    b"pomo-tuple-1" name count (attribute value)*    attributes sorted by name

where a string is its UTF-8 length as an unsigned LEB128 varint followed by
its bytes, `count` is a varint, and each value is one type tag and a payload,
so that values of different types never collide (1, 1.0, True and "1" all
differ):

    b"b" + 0x00/0x01                      bool
    b"i" + string of its decimal text      int
    b"f" + 8 bytes IEEE-754 big-endian     float (every NaN encoded as one)
    b"s" + string                          str (a cid value is its text: a str)
    b"y" + varint length + bytes           bytes
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections.abc import Iterable

_VERSION = b"pomo-tuple-1"
_CID_PREFIX = bytes([0x01, 0x55, 0x12, 0x20])  # CIDv1, raw, sha2-256, 32-byte digest
_NAN = struct.pack(">d", math.nan)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _varint(len(data)) + data


def encode_value(value: object) -> bytes:
    # bool before int: True is an int in Python, but not in PomoLogic.
    if isinstance(value, bool):
        return b"b" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"i" + _string(str(value))
    if isinstance(value, float):
        return b"f" + (_NAN if math.isnan(value) else struct.pack(">d", value))
    if isinstance(value, str):
        return b"s" + _string(value)
    if isinstance(value, bytes):
        return b"y" + _varint(len(value)) + value
    raise TypeError(f"a tuple value cannot be a {type(value).__name__}: {value!r}")


def encode_tuple(relation: str, pairs: Iterable[tuple[str, object]]) -> bytes:
    """The canonical bytes of a tuple: its relation and its attribute/value pairs by name."""
    ordered = sorted(pairs, key=lambda pair: pair[0])
    names = [name for name, _ in ordered]
    if len(set(names)) != len(names):
        raise ValueError(f"attribute named twice in {relation}{tuple(names)}")
    parts = [_VERSION, _string(relation), _varint(len(ordered))]
    for name, value in ordered:
        parts.append(_string(name))
        parts.append(encode_value(value))
    return b"".join(parts)


def cid(relation: str, pairs: Iterable[tuple[str, object]]) -> str:
    """The CIDv1 text (base32, prefix 'b') of the tuple `relation(pairs...)`."""
    digest = hashlib.sha256(encode_tuple(relation, pairs)).digest()
    text = base64.b32encode(_CID_PREFIX + digest).decode("ascii").lower().rstrip("=")
    return "b" + text


def _read_varint(data: bytes, at: int) -> tuple[int, int] | None:
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    return None


def is_cid(text: str) -> bool:
    """Whether `text` is a CIDv1 in base32 text, of any codec and multihash: what a cid-typed
    source attribute may hold (a value written from elsewhere need not be one of ours)."""
    if len(text) < 2 or text[0] != "b" or not text[1:].isascii() or not text[1:].islower():
        return False
    body = text[1:].upper()
    try:
        data = base64.b32decode(body + "=" * (-len(body) % 8))
    except ValueError:
        return False
    if base64.b32encode(data).decode("ascii").rstrip("=") != body:
        return False  # trailing bits set: not the canonical text of these bytes
    fields: list[int] = []
    at = 0
    for _ in range(4):  # version, codec, hash function, digest length
        read = _read_varint(data, at)
        if read is None:
            return False
        value, at = read
        fields.append(value)
    return fields[0] == 1 and len(data) - at == fields[3] and fields[3] > 0
