"""The source store's layout: its parts, snapshots and pins, Spark's Murmur3 `hash` (so a
fetch finds its keys' buckets without a Spark job), the SQL text of key filters, and the
conversions between the store's values and Spark's. See `source_store` for the layout on
disk."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pomoview.server.store.fs import TMP_PREFIX
from pomoview.server.types import SourceSchema, Tuple_, Value

_SPARK_TYPES: dict[str, Callable[[], DataType]] = {
    "int": LongType,
    "float": DoubleType,
    "string": StringType,
    "bool": BooleanType,
    "bytes": BinaryType,
    # A cid is its text (planner/cid.py); the manifest's schema keeps the type apart from string.
    "cid": StringType,
}
_BUCKET = "_bucket"  # a column of every file: the bucket of the row's clustering columns
_BUCKET_DIR = "_bucket_dir"  # the same, as the folder Spark writes each bucket to
_RESERVED = {"_epoch", "_op", _BUCKET, _BUCKET_DIR}
_PART_PREFIX = "part-"
_TMP_PREFIX = TMP_PREFIX
# The most buckets a part of a source has. A keyed fetch opens one file per bucket its keys
# hash to, and Spark's cost per file opened dominates a fetch of many keys: each file is
# sorted by its cluster, so row-group statistics, not buckets, do the pruning within it.
# Measured on the vote benchmark (2,000,000 votes, two sources fetched at once): a 100-key
# fetch 0.31 s with 16 buckets, 0.23 s with 8, 0.19 s with 4, 0.15 s with 2; a 1-key fetch
# and the hottest key (247,000 votes) alike within noise.
DEFAULT_BUCKETS = 4
# A part gets one bucket per this many rows, up to the source's bucket count.
DEFAULT_ROWS_PER_BUCKET = 1 << 19
# Small row groups (~8k rows of a few numbers) make the statistics of a sorted file fine-grained.
_ROW_GROUP_BYTES = 256 << 10
# Up to this many keys of one column, the key filter is an IN list that Spark pushes into the
# Parquet reader (the session's `inFilterThreshold` is raised to it); beyond, a broadcast
# semi-join, which reads all of the keys' buckets but whose plan does not grow with the keys.
_PUSH_LIMIT = 256
# The same for keys of several columns, pushed as an OR of ANDs.
_OR_LIMIT = 64
# Parquet's page-level filter costs (keys x pages) per file, more than it saves here: row-group
# statistics do the pruning.
_READ_OPTIONS = {"parquet.filter.columnindex.enabled": "false"}
# A fetch passes one path per file it reads; Spark lists more than its default 32 paths with a
# distributed job, which would cost more than the fetch.
_LISTING_THRESHOLD = 4096
# Source names become folder names.
_SOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SchemaMismatch(Exception):
    """A source is stored with a different schema than the one declared now."""


@dataclass(frozen=True)
class _Part:
    name: str
    cluster: tuple[str, ...]  # () for an unclustered part: every bucket must be read
    buckets: int
    files: tuple[tuple[int, str], ...]  # (bucket, file name in the part's folder), by bucket
    epochs: tuple[int, int]  # the first and last epoch it may hold
    rows: int | None  # at most this many rows; None if not known
    compacted: bool
    # Every row inserts (a bulk load, a compaction): a fetch that reads only such parts needs
    # no `_epoch` or `_op` to decide what is present, only to drop repeats.
    inserts_only: bool = False


@dataclass(frozen=True)
class _SourceState:
    schema: SourceSchema
    parts: tuple[_Part, ...]
    cluster: tuple[str, ...] | None = None  # None: not chosen yet
    buckets: int = DEFAULT_BUCKETS


@dataclass(frozen=True)
class _Snapshot:
    version: int
    sources: Mapping[str, _SourceState]


class Pin:
    """A snapshot of the store held by a reader: the files it lists stay on disk until
    `SourceStore.unpin`. `version` is the snapshot's version."""

    __slots__ = ("_snapshot",)

    def __init__(self, snapshot: _Snapshot) -> None:
        self._snapshot = snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version


# --- Spark's Murmur3 `hash`, so that a fetch finds its keys' buckets without a Spark job ----------

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


def _spark_hash(values: Sequence[Value]) -> int:
    """Spark's `hash(values...)` (Murmur3, seed 42, chained over the columns), a signed int."""
    h = _SEED
    for value in values:
        h = _hash_value(value, h)
    return h - (1 << 32) if h >= 1 << 31 else h


def _bucket_of(values: Sequence[Value], buckets: int) -> int:
    """Spark's `pmod(hash(values...), buckets)`."""
    return _spark_hash(values) % buckets


# --- SQL text: one string per filter, parsed by Spark in one call however many keys ---------------


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sql_literal(value: Value, type_name: str) -> str:
    if type_name == "int":
        number = int(value)
        return "(-9223372036854775807L - 1L)" if number == -(1 << 63) else f"{number}L"
    if type_name == "float":
        f = float(value)
        text = (
            "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity") if math.isinf(f) else repr(f)
        )
        return f"CAST('{text}' AS DOUBLE)"
    if type_name == "bool":
        return "TRUE" if value else "FALSE"
    if type_name in ("string", "cid"):
        assert isinstance(value, str)
        return f"CAST(X'{value.encode('utf-8').hex()}' AS STRING)"
    assert isinstance(value, bytes | bytearray)
    return f"X'{bytes(value).hex()}'"


def _keys_sql(columns: Sequence[str], keys: Sequence[tuple[Value, ...]], types: Mapping[str, str]) -> str:
    if len(columns) == 1:
        c = columns[0]
        return f"{_ident(c)} IN ({', '.join(_sql_literal(k[0], types[c]) for k in keys)})"
    return (
        "("
        + " OR ".join(
            "("
            + " AND ".join(
                f"{_ident(c)} = {_sql_literal(v, types[c])}" for c, v in zip(columns, k, strict=True)
            )
            + ")"
            for k in keys
        )
        + ")"
    )


# --- helpers -----------------------------------------------------------------------------------


def _check_schema(name: str, schema: SourceSchema) -> None:
    if not _SOURCE_NAME.fullmatch(name):
        raise ValueError(f"source name {name!r} is not an identifier")
    seen: set[str] = set()
    for attr, type_name in schema:
        if type_name not in _SPARK_TYPES:
            raise ValueError(f"source {name!r}, attribute {attr!r}: unknown type {type_name!r}")
        # Spark resolves column names case-insensitively by default.
        if attr.lower() in _RESERVED:
            raise ValueError(f"source {name!r}: attribute name {attr!r} is reserved")
        if attr.lower() in seen:
            raise ValueError(f"source {name!r}: attribute {attr!r} appears twice")
        seen.add(attr.lower())


def _describe(schema: SourceSchema) -> str:
    return "(" + ", ".join(f"{a}: {t}" for a, t in schema) + ")"


def _schema_difference(name: str, stored: SourceSchema, declared: SourceSchema) -> str:
    for i, (old, new) in enumerate(zip(stored, declared, strict=False)):
        if old != new:
            return (
                f"source {name!r} is stored with attribute {i + 1} as '{old[0]}: {old[1]}', "
                f"but is now declared with '{new[0]}: {new[1]}'"
            )
    longer, which = (stored, "stored") if len(stored) > len(declared) else (declared, "declared")
    extra = longer[min(len(stored), len(declared))]
    return (
        f"source {name!r} is stored as {_describe(stored)} but declared as "
        f"{_describe(declared)}: attribute '{extra[0]}' is only {which}"
    )


def _col(name: str) -> Column:
    return F.col(_ident(name))


def _to_spark(value: Value, type_name: str) -> Value:
    # Spark's DoubleType refuses a Python int; a float attribute may be given a whole number.
    if type_name == "float" and type(value) is int:
        return float(value)
    return value


def _from_spark(value: Any) -> Value:
    if isinstance(value, bytearray):
        return bytes(value)
    result: Value = value
    return result


def _struct(schema: SourceSchema) -> StructType:
    """The operations of a source as a flush writes them (before bucketing)."""
    return StructType(
        [StructField(attr, _SPARK_TYPES[t](), nullable=False) for attr, t in schema]
        + [
            StructField("_epoch", LongType(), nullable=False),
            StructField("_op", ByteType(), nullable=False),
        ]
    )


def _read_struct(schema: SourceSchema) -> StructType:
    return StructType([*_struct(schema).fields, StructField(_BUCKET, IntegerType(), nullable=False)])


_NAN = object()


def _latest(rows: Sequence[Any], schema: SourceSchema) -> list[Tuple_]:
    """The tuples whose latest operation among `rows` (attributes..., _epoch, _op) inserts."""
    width = len(schema)
    binary = any(t == "bytes" for _, t in schema)
    floats = [i for i, (_, t) in enumerate(schema) if t == "float"]
    best: dict[Any, tuple[tuple[int, int], Tuple_]] = {}
    for row in rows:
        values: Tuple_ = (
            tuple(_from_spark(v) for v in row[:width]) if binary else tuple(row[:width])
        )
        key: Any = values
        if floats:  # every NaN is one value to Spark, as each tuple is one tuple to the model
            key = tuple(_NAN if i in floats and v != v else v for i, v in enumerate(values))
        stamp = (row[width], row[width + 1])
        seen = best.get(key)
        if seen is None or stamp > seen[0]:
            best[key] = (stamp, values)
    return [values for (_epoch, op), values in best.values() if op == 1]


def _part_doc(part: _Part) -> dict[str, Any]:
    return {
        "cluster": list(part.cluster),
        "buckets": part.buckets,
        "files": [[b, f] for b, f in part.files],
        "epochs": list(part.epochs),
        "rows": part.rows,
        "compacted": part.compacted,
        "inserts_only": part.inserts_only,
    }
