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

import functools
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter

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


# The `Column` field holding a column of each exact Python type (subclasses other than Cid,
# and mixed types, go as rows, which decide their case value by value).
_COLUMN_FIELDS: dict[type, str] = {
    bool: "bool_values",
    int: "int_values",
    float: "float_values",
    str: "string_values",
    Cid: "cid_values",
    bytes: "bytes_values",
}


def rows_to_columns(
    rows: Sequence[Mapping[str, object]], out: pb.Columns | None = None
) -> pb.Columns | None:
    """The rows as one `Columns` (a column per attribute), or None when they do not fit
    one: rows naming different attributes, or an attribute whose values are not all of one
    of the types above (bytes and bytearray mix), or an int outside int64. The row form
    sends those as they are, and raises the errors for values it cannot send.

    `out`: an empty `Columns` to fill (a request's field), rather than a new one; it may be
    left half filled when the answer is None."""
    if out is None:
        out = pb.Columns()
    if not rows:
        return out
    names = list(rows[0])
    width = len(names)
    if width == 0 or any(type(n) is not str for n in names):
        return None
    if set(map(len, rows)) != {width}:
        return None
    try:
        # Whole-list passes in C: a write of many rows spends its client time here.
        values = list(map(itemgetter(*names), rows))
    except KeyError:
        return None
    columns = zip(*values, strict=True) if width > 1 else [values]
    for name, column in zip(names, columns, strict=True):
        types = set(map(type, column))
        if bytearray in types and types <= {bytes, bytearray}:
            column, types = [bytes(v) for v in column], {bytes}  # type: ignore[arg-type]
        field = _COLUMN_FIELDS.get(types.pop()) if len(types) == 1 else None
        if field is None:
            return None
        try:
            getattr(out.columns.add(name=name), field).values.extend(column)
        except (ValueError, TypeError):  # an int outside int64, a str protobuf refuses
            return None
    return out


def answer_rows(columns: pb.Columns, count: int) -> list[dict[str, object]]:
    """A columnar lookup answer's `count` rows, as dicts with their names in sorted order,
    as `row_to_dict` makes them. Raises ValueError for a column of another length."""
    named = _named_columns(columns, copy=False)
    named.sort(key=itemgetter(0))
    if set(map(len, (values for _, values in named))) - {count}:
        name, values = next((n, v) for n, v in named if len(v) != count)
        raise ValueError(f"column {name!r} has {len(values)} values for {count} rows")
    if not named:  # a view of no attribute: each row is ()
        return [{} for _ in range(count)]
    return _rows_maker(tuple(name for name, _ in named))([values for _, values in named])


RowsMaker = Callable[[list[Sequence[object]]], list[dict[str, object]]]


@functools.lru_cache(maxsize=1024)
def _rows_maker(names: tuple[str, ...]) -> RowsMaker:
    """Columns of these `names` -> their rows as dicts: a comprehension whose dict display
    names a variable per column, `{n0: v0, n1: v1, ...}`, about 3x faster than a
    `dict(zip(names, row))` per row. Its source holds only variable names made of numbers;
    the names are bound as values."""
    n = [f"n{i}" for i in range(len(names))]
    v = [f"v{i}" for i in range(len(names))]
    pairs = ", ".join(f"{a}: {b}" for a, b in zip(n, v, strict=True))
    source = f"lambda {', '.join(n)}: lambda cols: [{{{pairs}}} for {', '.join(v)}, in zip(*cols)]"
    maker: RowsMaker = eval(source)(*names)
    return maker


def _named_columns(columns: pb.Columns, copy: bool = True) -> list[tuple[str, Sequence[object]]]:
    """Each column's name and values (a Cid column's as Cids); `copy=False` leaves the
    others in their repeated fields, which zip and len read as well as lists."""
    named: list[tuple[str, Sequence[object]]] = []
    for column in columns.columns:
        kind = column.WhichOneof("values")
        values: Sequence[object] = () if kind is None else getattr(column, kind).values
        if kind == "cid_values":
            values = list(map(Cid, values))
        elif copy:
            values = list(values)
        named.append((column.name, values))
    return named


def columns_to_rows(columns: pb.Columns) -> list[dict[str, object]]:
    """The inverse of `rows_to_columns`: the rows, as dicts in the columns' order. Raises
    ValueError for columns of different lengths, which pair values of different rows."""
    named = _named_columns(columns)
    if len({len(values) for _, values in named}) > 1:
        raise ValueError(f"columns of different lengths: {[(n, len(v)) for n, v in named]}")
    names = [name for name, _ in named]
    return [dict(zip(names, row, strict=True)) for row in zip(*(v for _, v in named), strict=True)]
