"""A request's rows and keys as they arrived on the wire, turned into typed rows
(`server/typed_rows.py` checks them against a schema): one change's inserts or deletes, a
lookup's keys, each as rows of `Value`s or as typed columns. NaN is refused here, where the
row's position is known."""

from __future__ import annotations

from pomoview.planner.frontend.values import is_nan
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.errors import InvalidArgument, ServiceError
from pomoview.server.typed_rows import Column, ColumnRows, Rows, TypedRow
from pomoview.server.types import Value

_KINDS = {
    "int_value": "int",
    "float_value": "float",
    "string_value": "string",
    "bool_value": "bool",
    "bytes_value": "bytes",
    "cid_value": "cid",
}
# A `Column`'s oneof cases: `Value`'s, plural ("int_values").
_COLUMN_KINDS = {f"{k}s": v for k, v in _KINDS.items()}


def typed_row(row: pb.Row, where: str) -> TypedRow:
    out: dict[str, tuple[str, Value]] = {}
    for name, value in row.fields.items():
        kind = value.WhichOneof("kind")
        if kind is None:
            raise invalid(f"{where}: attribute {name!r} has no value")
        out[name] = (_KINDS[kind], getattr(value, kind))
    # NaN equals nothing, itself included: a row holding it could never be deleted, nor a key
    # holding it found. The first such attribute by name, as the columnar form reports it.
    nan = sorted(n for n, (_, v) in out.items() if is_nan(v))
    if nan:
        raise invalid(f"{where}: attribute {nan[0]!r} is NaN, which equals no value")
    return out


def column_rows(columns: pb.Columns) -> ColumnRows:
    """The columnar form of one side of a change, for `write_rows.to_tuples` to check."""
    out = []
    for column in columns.columns:
        kind = column.WhichOneof("values")
        if kind is None:
            out.append(Column(column.name, "", ()))
        else:
            # A list, not the repeated field: zipping and indexing plain lists is faster.
            out.append(Column(column.name, _COLUMN_KINDS[kind], list(getattr(column, kind).values)))
    return ColumnRows(tuple(out))


def side(change: pb.SourceChanges, i: int, side: str) -> Rows:
    """One side ("inserts" or "deletes") of change `i`, in the form it was sent in."""
    rows = getattr(change, side)
    field = f"{side[:-1]}_columns"
    if change.HasField(field):
        if rows:
            raise invalid(f"changes[{i}]: {side} are given both as rows and as {field}")
        return _without_nan(column_rows(getattr(change, field)), f"changes[{i}].{side}")
    return [typed_row(r, f"changes[{i}].{side}[{j}]") for j, r in enumerate(rows)]


def _without_nan(columns: ColumnRows, where: str) -> ColumnRows:
    """`columns`, refused if a value is NaN, in the row form's words (typed_row): its first
    row, first name."""
    nans = [
        (j, column.name)
        for column in columns.columns
        if column.type_name == "float"
        for j in [next((j for j, v in enumerate(column.values) if is_nan(v)), None)]
        if j is not None
    ]
    if nans:
        j, name = min(nans)
        raise invalid(f"{where}[{j}]: attribute {name!r} is NaN, which equals no value")
    return columns


def lookup_keys(request: pb.LookupRequest) -> Rows:
    """A lookup's keys, in the form they were sent in: rows (`keys`) or columns
    (`key_columns`, checked against the view as a write's columns are against a source)."""
    if request.HasField("key_columns"):
        if request.keys:
            raise invalid("the keys are given both as rows (keys) and as key_columns")
        return _without_nan(column_rows(request.key_columns), "key_columns")
    return [typed_row(k, f"keys[{i}]") for i, k in enumerate(request.keys)]


def invalid(message: str) -> ServiceError:

    return InvalidArgument(message)
