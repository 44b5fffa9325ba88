"""The rows of a write as they arrived, and their validation into tuples of a source.

A side (inserts or deletes) of one source's change arrives in one of two wire forms: rows of
typed values (`repeated Row`), or typed columns (`Columns`), much cheaper to encode and
decode for a batch of many rows. `to_tuples` is the one place that checks either form
against the source's schema, with the same messages for the same rows: a columnar side is
checked as its row 0, since every row of a typed column has that row's types. A limit on
the rows of a write can count `len()` of either form before anything is converted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pomoview.planner.frontend.validate import Relation
from pomoview.planner.frontend.values import BadValue, coerce
from pomoview.server.errors import InvalidArgument
from pomoview.server.types import SourceSchema, Tuple_, Value

# A value as it arrived on the wire: (type name, Python value).
TypedValue = tuple[str, Value]
TypedRow = Mapping[str, TypedValue]


@dataclass(frozen=True)
class Column:
    """One attribute's values, all of type `type_name` ("" for a column that named no type
    and so holds no value)."""

    name: str
    type_name: str
    values: Sequence[Value]


@dataclass(frozen=True)
class ColumnRows:
    """Rows given as columns: row i is the i-th value of each column."""

    columns: tuple[Column, ...]

    def __len__(self) -> int:
        """The rows, as the first column counts them (`to_tuples` checks the others agree)."""
        return len(self.columns[0].values) if self.columns else 0


# One side of one source's change, in either wire form.
Rows = Sequence[TypedRow] | ColumnRows


@dataclass(slots=True)
class TypedKeys:
    """A lookup's keys already checked against `relation`, its view's relation (the wire's
    shortcut for the common shapes, api/requests.py `KeyShapes`): the key attributes in the
    view's declared order and each key as a tuple of their values. `rows()` gives the keys
    as they arrived, to check against another relation (a program installed meanwhile)."""

    relation: Relation
    attrs: tuple[str, ...]
    tuples: list[Tuple_]
    rows: Callable[[], Rows]

    def __len__(self) -> int:
        return len(self.tuples)


def coerce_typed(value: TypedValue, expected: str, where: str) -> Value:
    """A value as it arrived on the wire, (its type as sent, its Python value), as a value of
    the type `expected`; raises InvalidArgument naming `where` (values.coerce says what fits).

    NaN passes here: the service refuses it for every row of either form, before the schema
    is known and in its own words (service.typed_row), and a columnar side is checked here
    as its row 0 only."""
    kind, raw = value
    try:
        return coerce(raw, expected, where, given=kind, allow_nan=True)
    except BadValue as err:
        raise InvalidArgument(str(err)) from None




def typed_tuple(row: TypedRow, schema: SourceSchema, where: str) -> Tuple_:
    """One row as a tuple in the schema's order; raises InvalidArgument naming `where` and
    the attribute for a missing, unknown or mistyped attribute."""
    names = [a for a, _ in schema]
    missing = [a for a in names if a not in row]
    extra = sorted(a for a in row if a not in names)
    if missing:
        raise InvalidArgument(f"{where}: missing attribute {', '.join(missing)}")
    if extra:
        raise InvalidArgument(
            f"{where}: unknown attribute {', '.join(map(repr, extra))} (it has {', '.join(names)})"
        )
    return tuple(coerce_typed(row[a], t, f"{where}: attribute {a!r}") for a, t in schema)


def to_tuples(rows: Rows, schema: SourceSchema, where: str) -> list[Tuple_]:
    """The rows as tuples of the schema; `where` names the side ("vote inserts"), and an
    error names the row within it ("vote inserts[3]: attribute 'user_id': ...")."""
    if isinstance(rows, ColumnRows):
        return _column_tuples(rows, schema, where)
    return [typed_tuple(row, schema, f"{where}[{i}]") for i, row in enumerate(rows)]


def _column_tuples(rows: ColumnRows, schema: SourceSchema, where: str) -> list[Tuple_]:
    by_name: dict[str, Column] = {}
    count = len(rows)
    first = rows.columns[0].name if rows.columns else ""
    for column in rows.columns:
        if column.name in by_name:
            raise InvalidArgument(f"{where}: column {column.name!r} is given twice")
        by_name[column.name] = column
        if len(column.values) != count:
            raise InvalidArgument(
                f"{where}: column {column.name!r} has {len(column.values)} values, "
                f"column {first!r} has {count}"
            )
    if count == 0:
        return []  # as the row form: no row, nothing to check
    exact = len(by_name) == len(schema) and all(
        a in by_name and by_name[a].type_name == t != "cid" for a, t in schema
    )
    if not exact:
        # Row 0 has the types of every row, so checking it checks them all, in the row form's
        # words. (A column of its attribute's own type, not a cid, passes coerce unchanged.)
        typed_tuple({c.name: (c.type_name, c.values[0]) for c in rows.columns}, schema, f"{where}[0]")
    ordered: list[Sequence[Value]] = []
    for attribute, type_name in schema:
        column = by_name[attribute]
        if column.type_name == "int" and type_name == "float":
            # coerce's int -> float, for the whole column at once (row 0 told it is ints).
            ordered.append(list(map(float, column.values)))
        elif type_name == "cid":
            # Every value's text is checked, not only row 0's: a type says nothing of it.
            ordered.append(
                [
                    coerce_typed((column.type_name, v), "cid", f"{where}[{i}]: attribute {attribute!r}")
                    for i, v in enumerate(column.values)
                ]
            )
        else:
            ordered.append(column.values)
    return list(zip(*ordered, strict=True))


def typed_keys(
    relation: Relation, view: str, keys: Rows | TypedKeys
) -> tuple[tuple[str, ...], list[Tuple_]]:
    """A lookup's key attributes (in the view's declared order) and its keys as tuples of
    values of the attributes' types; raises for an unknown attribute or a bad value. Keys as
    columns are checked as a write's columns are (`to_tuples`)."""
    if isinstance(keys, TypedKeys):
        if keys.relation is relation:
            return keys.attrs, keys.tuples
        keys = keys.rows()  # checked against another program's view: check them again
    if isinstance(keys, ColumnRows):
        key_attrs = _known(relation, view, [c.name for c in keys.columns])
        schema = tuple((a, relation.types[a]) for a in key_attrs)
        columns = to_tuples(keys, schema, "key_columns")
        return key_attrs if columns else (), columns
    if not keys:
        return (), []
    key_attrs = tuple(keys[0])
    named = set(key_attrs)
    for i, key in enumerate(keys):
        if key.keys() != named:
            raise InvalidArgument(f"keys[{i}] names {sorted(key)}, keys[0] names {sorted(key_attrs)}")
    key_attrs = _known(relation, view, key_attrs)
    typed = [(a, relation.types[a]) for a in key_attrs]
    key_tuples: list[Tuple_] = []
    for i, k in enumerate(keys):
        values = []
        for a, t in typed:
            kind, raw = k[a]
            # Hits come here for every key of every read: a key of the attribute's own
            # kind passes as it is (but a cid's text is checked).
            values.append(raw if kind == t != "cid" else coerce_typed(k[a], t, f"keys[{i}].{a}"))
        key_tuples.append(tuple(values))
    return key_attrs, key_tuples


def _known(relation: Relation, view: str, names: Sequence[str]) -> tuple[str, ...]:
    """The key attributes `names` in the view's declared order; raises for a name the view
    lacks."""
    unknown = [a for a in names if a not in relation.attributes]
    if unknown:
        raise InvalidArgument(
            f"{view!r} has no attribute {', '.join(map(repr, unknown))} "
            f"(it has {', '.join(relation.attributes)})"
        )
    return tuple(a for a in relation.attributes if a in names)
