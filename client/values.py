"""Conversion between Python values and the wire `Value` / `Row` messages.

The mapping is one to one, so a row read back equals the row written:

| Python            | `Value` case   |
|-------------------|----------------|
| `bool`            | `bool_value`   |
| `int` (int64)     | `int_value`    |
| `float`           | `float_value`  |
| `str`             | `string_value` |
| `bytes`/bytearray | `bytes_value`  |
| `Cid` (a str)     | `cid_value`    |
"""

from __future__ import annotations

from collections.abc import Mapping

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class Cid(str):
    """A content id (CIDv1, base32 text); a `str` that travels as `cid_value`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Cid({str.__repr__(self)})"


def to_value(name: str, value: object) -> pb.Value:
    """Returns the `Value` for attribute `name`; raises TypeError/ValueError naming it."""
    # bool before int: bool is an int subclass and would otherwise become int_value.
    if isinstance(value, bool):
        return pb.Value(bool_value=value)
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"attribute {name!r}: int {value} is outside int64")
        return pb.Value(int_value=int(value))
    if isinstance(value, float):
        return pb.Value(float_value=value)
    # Cid before str, for the same reason as bool before int.
    if isinstance(value, Cid):
        return pb.Value(cid_value=str(value))
    if isinstance(value, str):
        return pb.Value(string_value=value)
    if isinstance(value, bytes | bytearray):
        return pb.Value(bytes_value=bytes(value))
    raise TypeError(
        f"attribute {name!r}: unsupported type {type(value).__name__} "
        "(expected int, float, str, bool, bytes or Cid)"
    )


def from_value(name: str, value: pb.Value) -> object:
    """Returns the Python value of a `Value`; raises ValueError naming `name` if it is unset."""
    kind = value.WhichOneof("kind")
    if kind == "int_value":
        return value.int_value
    if kind == "float_value":
        return value.float_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "bytes_value":
        return value.bytes_value
    if kind == "cid_value":
        return Cid(value.cid_value)
    # Proto3 has no null; an unset oneof means the sender left the attribute out.
    raise ValueError(f"attribute {name!r}: value has no type set")


def dict_to_row(values: Mapping[str, object]) -> pb.Row:
    """Returns the `Row` for a mapping of attribute name to Python value."""
    row = pb.Row()
    for name, value in values.items():
        if not isinstance(name, str):
            raise TypeError(f"attribute name {name!r} is not a str")
        row.fields[name].CopyFrom(to_value(name, value))
    return row


def row_to_dict(row: pb.Row) -> dict[str, object]:
    """Returns a `Row` as a plain dict of attribute name to Python value, names in sorted order.

    A protobuf map has no order of its own; sorting makes printed rows repeatable.
    """
    return {name: from_value(name, row.fields[name]) for name in sorted(row.fields)}
