"""Source schemas as the store keeps them: which names and types a source may have, the
message when a stored schema differs from a declared one, the Spark types of a part's
files, and the conversion of a value to the Spark type of its attribute."""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa
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

from pomoview.server.store.layout import BUCKET_COLUMN, BUCKET_DIR_COLUMN
from pomoview.server.types import SourceSchema, Value

SPARK_TYPES: dict[str, Callable[[], DataType]] = {
    "int": LongType,
    "float": DoubleType,
    "string": StringType,
    "bool": BooleanType,
    "bytes": BinaryType,
    # A cid is its text (planner/cid.py); the manifest's schema keeps the type apart from string.
    "cid": StringType,
}
# The Arrow type a flush builds each attribute's column in (Spark reads it as SPARK_TYPES').
ARROW_TYPES: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "bytes": pa.binary(),
    "cid": pa.string(),
}
# Columns of the store's own, in a part's files or in the Spark jobs that write them.
_RESERVED = {"_epoch", "_op", BUCKET_COLUMN, BUCKET_DIR_COLUMN}
# Source names become folder names.
_SOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SchemaMismatch(Exception):
    """A source is stored with a different schema than the one declared now."""


def check_schema(name: str, schema: SourceSchema) -> None:
    """Raises ValueError if `name` cannot name a source folder, or `schema` has an unknown
    type, a reserved attribute name or an attribute twice."""
    if not _SOURCE_NAME.fullmatch(name):
        raise ValueError(f"source name {name!r} is not an identifier")
    seen: set[str] = set()
    for attr, type_name in schema:
        if type_name not in SPARK_TYPES:
            raise ValueError(f"source {name!r}, attribute {attr!r}: unknown type {type_name!r}")
        # Spark resolves column names case-insensitively by default.
        if attr.lower() in _RESERVED:
            raise ValueError(f"source {name!r}: attribute name {attr!r} is reserved")
        if attr.lower() in seen:
            raise ValueError(f"source {name!r}: attribute {attr!r} appears twice")
        seen.add(attr.lower())


def _describe(schema: SourceSchema) -> str:
    return "(" + ", ".join(f"{a}: {t}" for a, t in schema) + ")"


def schema_difference(name: str, stored: SourceSchema, declared: SourceSchema) -> str:
    """The first difference between the `stored` and the `declared` schema of source `name`."""
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


def to_spark(value: Value, type_name: str) -> Value:
    """`value` as Spark takes it for an attribute of type `type_name`."""
    # Spark's DoubleType refuses a Python int; a float attribute may be given a whole number.
    if type_name == "float" and type(value) is int:
        return float(value)
    return value


def operations_struct(schema: SourceSchema) -> StructType:
    """The operations of a source as a flush writes them (before bucketing)."""
    return StructType(
        [StructField(attr, SPARK_TYPES[t](), nullable=False) for attr, t in schema]
        + [
            StructField("_epoch", LongType(), nullable=False),
            StructField("_op", ByteType(), nullable=False),
        ]
    )


def operations_arrow_schema(schema: SourceSchema) -> pa.Schema:
    """`operations_struct` in Arrow: the columns a flush builds its table of operations in."""
    return pa.schema(
        [pa.field(attr, ARROW_TYPES[t], nullable=False) for attr, t in schema]
        + [pa.field("_epoch", pa.int64(), nullable=False), pa.field("_op", pa.int8(), nullable=False)]
    )


def part_file_struct(schema: SourceSchema) -> StructType:
    """The columns of a part's files: the operations and their bucket."""
    return StructType(
        [*operations_struct(schema).fields, StructField(BUCKET_COLUMN, IntegerType(), nullable=False)]
    )
