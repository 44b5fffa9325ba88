"""Which ordered views can fetch only their first rows: PomoRA -> a SourceWindow plan or the
reason it cannot (pure; the builder asks it for each ordered view with a limit).

A view's TopK needs only the first `limit` rows of each key. When the view's rows are a
one-to-one map of one source's tuples, those are the key's first `limit` tuples of that
source in the same order, which the keyed Spark job can return alone (`ORDER BY ...
LIMIT`, dataflow/operators/source_window.py). The view's expression must then be, under
its Distinct, projections and renames of the columns of a Select of `attribute ==
constant` tests over a Scan of a stored source, keeping every attribute the tests do not
fix. Each shape outside that keeps the whole key, for the reason `Whole` gives:

- a projection that drops a free attribute: two tuples can map to one row, so `limit`
  tuples may give fewer than `limit` rows;
- a constant column, a comparison other than `==` with a constant, a join, an aggregate,
  a union, recursion, a content id: the rows are not the source's tuples;
- a derived, transient or built-in relation, or a `p@next`: not a stored source;
- an attribute of a type whose order Spark and Python may not share (a float's NaN,
  bytes): only int, string and bool columns are windowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pomoview.dataflow.node import Filters
from pomoview.planner.frontend.relations import Relation
from pomoview.planner.ir import ra

# Types whose order Spark (ORDER BY) and Python (sorted) agree on.
ORDERED_TYPES = frozenset({"int", "string", "bool"})


@dataclass(frozen=True)
class SourceWindowPlan:
    """The view's rows as `source`'s tuples: view column i is source attribute
    `columns[i]` (a position in `attributes`), over the tuples `filters` select."""

    source: str
    attributes: tuple[str, ...]
    columns: tuple[int, ...]
    filters: Filters


@dataclass(frozen=True)
class Whole:
    """Why the view's fills read every tuple of a key."""

    reason: str


def source_window(
    expr: ra.Expr, relations: Mapping[str, Relation], hidden: Mapping[str, tuple[str, ...]]
) -> SourceWindowPlan | Whole:
    """The SourceWindow plan of a view whose expression is `expr`, or why there is none."""
    if isinstance(expr, ra.Distinct):
        expr = expr.input
    names = {c: c for c in expr.schema}  # view column -> the column of the current expression
    view_schema = expr.schema
    while isinstance(expr, ra.Project):
        renamed: dict[str, str] = {}
        for out, operand in expr.outputs:
            if not isinstance(operand, ra.Col):
                return Whole(f"column {out!r} is a constant, not a source attribute")
            renamed[out] = operand.name
        names = {view: renamed[current] for view, current in names.items()}
        expr = expr.input
    filters: list[tuple[str, object]] = []
    while isinstance(expr, ra.Select):
        for p in expr.predicates:
            fixed = _fixed(p)
            if fixed is None:
                return Whole(f"the test {p.left} {p.op} {p.right} is not attribute == constant")
            filters.append(fixed)
        expr = expr.input
    if not isinstance(expr, ra.Scan):
        return Whole(f"its rows come from a {type(expr).__name__}, not from one source's tuples")
    relation = relations.get(expr.relation)
    if expr.relation in hidden or relation is None or relation.kind != "source" or relation.transient:
        return Whole(f"{expr.relation!r} is not a stored source")
    attributes = expr.schema
    fixed_names = {a for a, _ in filters}
    kept = set(names.values())
    dropped = [a for a in attributes if a not in kept and a not in fixed_names]
    if dropped:
        return Whole(f"it drops the attributes {dropped} of {expr.relation!r}: two tuples may make one row")
    if len(kept) != len(view_schema):
        return Whole(f"an attribute of {expr.relation!r} is two columns")
    for a in kept:
        if relation.types[a] not in ORDERED_TYPES:
            return Whole(f"attribute {a!r} is a {relation.types[a]}; only int, string and bool are windowed")
    columns = tuple(attributes.index(names[c]) for c in view_schema)
    return SourceWindowPlan(expr.relation, attributes, columns, tuple(dict.fromkeys(filters)))


def _fixed(p: ra.Compare) -> tuple[str, object] | None:
    """(attribute, value) for `attribute == constant` (either way round), else None."""
    if p.op != "==":
        return None
    if isinstance(p.left, ra.Col) and isinstance(p.right, ra.Const):
        return p.left.name, p.right.value
    if isinstance(p.right, ra.Col) and isinstance(p.left, ra.Const):
        return p.right.name, p.left.value
    return None
