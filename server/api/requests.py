"""A request's rows and keys as they arrived on the wire, turned into typed rows
(`server/typed_rows.py` checks them against a schema): one change's inserts or deletes, a
lookup's keys, each as rows of `Value`s or as typed columns. NaN is refused here, where the
row's position is known."""

from __future__ import annotations

from collections.abc import Sequence

from pomoview.planner.frontend.validate import Relation
from pomoview.planner.frontend.values import is_nan
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.errors import InvalidArgument, ServiceError
from pomoview.server.typed_rows import Column, ColumnRows, Rows, TypedKeys, TypedRow
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
    return row_keys(request.keys)


def row_keys(keys: Sequence[pb.Row]) -> list[TypedRow]:
    """Keys sent as rows (a lookup's `keys`, an eviction's), each checked, named by index."""
    return [typed_row(k, f"keys[{i}]") for i, k in enumerate(keys)]


def invalid(message: str) -> ServiceError:

    return InvalidArgument(message)


# A shape of key columns: each column's name and value case ("int_values"), in the order sent.
Shape = tuple[tuple[str, str | None], ...]
# What a shape of one relation's keys makes: the key attributes in the view's declared order
# and, in that order, each column's position and value case; None where the shape is not a
# plain one (the general path checks it and says what is wrong).
Plan = tuple[tuple[str, ...], tuple[tuple[int, str], ...]] | None
# Shapes kept at most: every plain shape is a subset of a view's attributes in some order.
MAX_SHAPES = 1024
# Types whose values a plan passes as they arrive: a cid's text must be checked, and a
# float may be NaN (refused) or sent as ints (converted).
_AS_SENT = frozenset({"int", "string", "bool", "bytes"})


class KeyShapes:
    """A lookup's keys checked against its view's relation, the shortcut for the shape nearly
    every read sends: keys as columns (`key_columns`), each of its attribute's own type, none
    a float or a cid. Such keys need no check per value, so they become tuples in one
    `zip`, the decision (which attributes, in which order) made once per shape and relation.

    Why: a hit's cost is mostly this bookkeeping (in process, 13 us a 1-key hit of which 7 us
    made the keys through `lookup_keys` and `typed_keys`); every other shape takes that
    general path, which gives the same tuples and the errors."""

    def __init__(self) -> None:
        self._plans: dict[tuple[int, Shape], tuple[Relation, Plan]] = {}

    def typed(self, request: pb.LookupRequest, relation: Relation) -> TypedKeys | None:
        """The request's keys checked against `relation`, or None: not a plain shape (or no
        keys, or columns of different lengths), for the general path."""
        if not request.HasField("key_columns") or request.keys:
            return None
        columns = request.key_columns.columns
        shape = tuple((c.name, c.WhichOneof("values")) for c in columns)
        known = self._plans.get((id(relation), shape))
        plan = known[1] if known is not None and known[0] is relation else self._plan(relation, shape)
        if plan is None:
            return None
        attrs, order = plan
        values = [getattr(columns[i], case).values for i, case in order]
        count = len(values[0])
        if count == 0 or (len(values) > 1 and any(len(v) != count for v in values)):
            return None
        return TypedKeys(relation, attrs, list(zip(*values, strict=True)), lambda: lookup_keys(request))

    def _plan(self, relation: Relation, shape: Shape) -> Plan:
        position: dict[str, tuple[int, str]] = {}
        for i, (name, case) in enumerate(shape):
            if (
                case is None
                or name in position
                or name not in relation.attributes
                or _COLUMN_KINDS.get(case) != relation.types.get(name)
                or relation.types[name] not in _AS_SENT
            ):
                position.clear()  # not plain: the general path checks it
                break
            position[name] = (i, case)
        plan: Plan = None
        if position:
            attrs = tuple(a for a in relation.attributes if a in position)
            plan = attrs, tuple(position[a] for a in attrs)
        if len(self._plans) >= MAX_SHAPES:
            self._plans.clear()
        self._plans[(id(relation), shape)] = (relation, plan)
        return plan
