"""Pass 4: PomoRA -> a PomoFlow circuit for one reader (view, key attributes).

Non-recursive strata are DAGs of root operators. Partial eligibility (DESIGN §3,
key provenance): the builder walks from the reader to the sources carrying the
key the node below will upquery by. Each operator passes the key to its inputs
when the key traces through it:

- filters and unions pass it unchanged; projections translate it to the
  columns they copy (constant columns filter instead, and drop out); a content
  id extension passes it unless the key includes the content id;
- a join, semijoin or antijoin passes it on when the key is exactly its join
  columns, and an aggregate when the key is exactly its group columns (both
  sides are then filled together for a key);
- otherwise the key is lost: that operator and everything above it is full,
  hydrated once with one scan of each source.

So every partial state has only partial states (or the reader) below it, and
a full state never sits below a partial one (Noria's eligibility rule).

A recursive stratum (ra.Fixpoint) becomes one Child circuit per reader circuit,
in incremental mode and FULL (DESIGN §3): a Feedback per recursive relation,
the union of its rule bodies, a DistinctTrace on each result, incremental
joins of IndexWith streams. Every part of a body that reads no recursive
relation is built outside the child (full) and imported. Inside, negation is a
difference (lower.expand_negations) and an aggregate over a lower-stratum atom
is computed outside (one row per non-empty group) and joined in; the value of
an empty group (0 for count and sum) is added for the body rows whose group
has no atom row. The child's results are read through ChildOutput (full), and
the child hydrates with the circuit (Circuit.hydrate calls Child.hydrate).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from pomoview.dataflow.aggregates import NO_VALUE, UserAggregate, make
from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.keyed_state import Row
from pomoview.dataflow.node import Fetch, Filters, Node, project
from pomoview.dataflow.operators.aggregate import Aggregate
from pomoview.dataflow.operators.aggregate_join import AggregateJoin
from pomoview.dataflow.operators.antijoin import AntiJoin
from pomoview.dataflow.operators.child import Child, ChildOutput
from pomoview.dataflow.operators.distinct_incremental import DistinctIncremental
from pomoview.dataflow.operators.distinct_trace import DistinctTrace
from pomoview.dataflow.operators.extend import Extend
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.filter import Filter
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.operators.join import Join
from pomoview.dataflow.operators.join_trace import incremental_join
from pomoview.dataflow.operators.map import Column, Constant, Map
from pomoview.dataflow.operators.minus import Minus
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.unit import Unit
from pomoview.dataflow.operators.z1_trace import Z1Trace

from . import ra
from .cid import cid
from .validate import Relation

Key = tuple[str, ...] | None  # column names the node below upqueries by; None = full
UserFunction = Callable[[list[tuple[Any, ...]]], object]

COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _positions(schema: tuple[str, ...], names: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(schema.index(n) for n in names)


def _key_through(key: Key, columns: tuple[str, ...]) -> Key:
    """The key a two-input operator keyed on `columns` passes to both inputs, or None (full).

    Both sides can be filled for a key only when the key is exactly those columns; the
    key's order is kept, so that the operator and its inputs agree on it.
    """
    if key is not None and columns and set(key) == set(columns):
        return key
    return None


def _predicate(
    schema: tuple[str, ...], predicates: tuple[ra.Compare, ...]
) -> Callable[[Row], bool]:
    def operand(o: ra.Operand) -> Callable[[Row], object]:
        if isinstance(o, ra.Const):
            value = o.value
            return lambda row: value
        index = schema.index(o.name)
        return lambda row: row[index]

    tests = [(operand(p.left), COMPARE[p.op], operand(p.right)) for p in predicates]

    def accept(row: Row) -> bool:
        try:
            return all(op(left(row), right(row)) for left, op, right in tests)
        except TypeError:  # an ordering between values of different types never holds
            return False

    return accept


def _without_cid(key: Key) -> Key:
    """The key a content id extension passes to its input (None unless it lacks the id)."""
    return key if key is None or ra.CID_COLUMN not in key else None


def _sorted_values(values: set[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    try:
        return sorted(values)
    except TypeError:  # values of mixed types (an `any` column): order by type, then text
        return sorted(values, key=lambda v: tuple((type(x).__qualname__, repr(x)) for x in v))


def user_aggregate(name: str, fn: UserFunction, positions: tuple[int, ...]) -> UserAggregate:
    """`fn` over a group's distinct value tuples (sorted), as a dataflow UserAggregate.

    The aggregated elements are whole atom rows (group columns and values); a
    group's rows share their group columns, so its distinct value tuples are the
    distinct projections of its rows. `fn` returning None means "no result".
    """

    def run(items: tuple[tuple[object, int], ...]) -> object:
        values = {tuple(row[i] for i in positions) for row, _ in items}  # type: ignore[index]
        result = fn(_sorted_values(values))
        return NO_VALUE if result is None else result

    return UserAggregate(name, run)


def _row_cid(relation: str, attributes: tuple[str, ...]) -> Callable[[Row], object]:
    return lambda row: cid(relation, zip(attributes, row, strict=True))


class _Loop:
    """What one Child being built keeps: its feedbacks and the nodes built for it."""

    def __init__(self, fixpoint: ra.Fixpoint) -> None:
        self.fixpoint = fixpoint
        self.feedbacks = {
            name: Feedback(fixpoint.schema_of(name)) for name in fixpoint.relations
        }
        self.nodes: dict[int, Node] = {}  # id(expr) -> node, so shared sub-expressions are built once


class CircuitBuilder:
    """Builds one reader's circuit; a fixpoint is built once per circuit (one Child)."""

    def __init__(
        self,
        relations: Mapping[str, Relation],
        exprs: Mapping[str, ra.Expr],
        fetch: Fetch,
        *,
        hidden: Mapping[str, tuple[str, ...]] | None = None,
        aggregates: Mapping[str, UserFunction] | None = None,
        partial: bool = True,
    ) -> None:
        self.allow_partial = partial
        self.relations = relations
        self.exprs = exprs
        self.fetch = fetch
        self.hidden = hidden or {}
        self.aggregates = aggregates or {}
        self._children: dict[int, Child] = {}  # id(Fixpoint) -> its Child
        self._building: set[str] = set()  # derived relations being built (cycle guard)

    # -- aggregates -------------------------------------------------------------

    def aggregate_function(
        self, expr: ra.Aggregate, atom_schema: tuple[str, ...]
    ) -> tuple[str | UserAggregate, int | None]:
        """The dataflow aggregate and the atom column it reads (None: the whole row)."""
        if expr.function in ("count", "sum", "min", "max"):
            if expr.function == "count":
                return "count", None
            return expr.function, atom_schema.index(expr.values[0])
        fn = self.aggregates.get(expr.function)
        if fn is None:
            raise KeyError(f"no function given for the aggregate {expr.function!r}")
        return user_aggregate(expr.function, fn, _positions(atom_schema, expr.values)), None

    # -- root operators ---------------------------------------------------------

    def build(self, expr: ra.Expr, key: Key) -> Node:
        if key == () or not self.allow_partial:
            key = None
        if isinstance(expr, ra.Scan):
            attributes = self.hidden.get(expr.relation)
            if attributes is None and self.relations[expr.relation].kind == "derived":
                # A derived relation is built in place; one that reaches itself outside a
                # Fixpoint means the strata are wrong, which must not become a stack overflow.
                if expr.relation in self._building:
                    raise AssertionError(
                        f"{expr.relation!r} depends on itself outside a recursive stratum"
                    )
                self._building.add(expr.relation)
                try:
                    return self.build(self.exprs[expr.relation], key)
                finally:
                    self._building.discard(expr.relation)
            return self._source_index(expr, key, ())
        if isinstance(expr, ra.Recursive):
            # Full whatever the key: the node below upqueries the child's totals.
            child = self.child(expr.fixpoint)
            return ChildOutput(child, expr.fixpoint.relations.index(expr.relation))
        if isinstance(expr, ra.CidExtend):
            inner = key if key is None or ra.CID_COLUMN not in key else None
            parent = self.build(expr.input, inner)
            return Extend(parent, ra.CID_COLUMN, _row_cid(expr.relation, expr.input.schema), expr.relation)
        if isinstance(expr, ra.Select):
            pushed = self._pushable(expr)
            if pushed:
                # `attr == constant` over a source: the SourceIndex (and its fetches) select
                # the matching tuples; the other predicates stay in a Filter above it.
                filters = tuple(dict.fromkeys(pushed.values()))
                scan = expr.input
                below: Node
                if isinstance(scan, ra.CidExtend):
                    assert isinstance(scan.input, ra.Scan)
                    index = self._source_index(scan.input, _without_cid(key), filters)
                    below = Extend(
                        index, ra.CID_COLUMN, _row_cid(scan.relation, scan.input.schema), scan.relation
                    )
                else:
                    assert isinstance(scan, ra.Scan)
                    below = self._source_index(scan, key, filters)
                rest = tuple(p for p in expr.predicates if p not in pushed)
                if not rest:
                    return below
                label = " and ".join(f"{p.left} {p.op} {p.right}" for p in rest)
                return Filter(below, _predicate(expr.schema, rest), label)
            label = " and ".join(f"{p.left} {p.op} {p.right}" for p in expr.predicates)
            return Filter(
                self.build(expr.input, key), _predicate(expr.schema, expr.predicates), label
            )
        if isinstance(expr, ra.Project):
            outputs = dict(expr.outputs)
            parent_key: list[str] = []
            for name in key or ():
                operand = outputs[name]
                if isinstance(operand, ra.Col) and operand.name not in parent_key:
                    parent_key.append(operand.name)
            parent = self.build(expr.input, tuple(parent_key) if key is not None else None)
            return self._map(parent, expr)
        if isinstance(expr, (ra.Join, ra.SemiJoin, ra.AntiJoin)):
            inner = _key_through(key, expr.on)
            on = inner or expr.on
            left, right = self.build(expr.left, inner), self.build(expr.right, inner)
            # A semijoin's right columns are all join columns: the join adds none.
            node = AntiJoin if isinstance(expr, ra.AntiJoin) else Join
            return node(
                left,
                right,
                _positions(left.schema, on),
                _positions(right.schema, on),
                partial=inner is not None,
            )
        if isinstance(expr, ra.Difference):
            return Minus(self.build(expr.left, key), self.build(expr.right, key))
        if isinstance(expr, ra.Aggregate):
            inner = _key_through(key, expr.group)
            group = inner or expr.group
            body, atom = self.build(expr.body, inner), self.build(expr.atom, inner)
            function, value_col = self.aggregate_function(expr, atom.schema)
            return AggregateJoin(
                body,
                atom,
                _positions(body.schema, group),
                _positions(atom.schema, group),
                value_col,
                function,
                expr.result,
                partial=inner is not None,
            )
        if isinstance(expr, ra.Union):
            return Union(tuple(self.build(i, key) for i in expr.inputs))
        if isinstance(expr, ra.Distinct):
            parent = self.build(expr.input, key)
            return DistinctIncremental(
                parent, _positions(parent.schema, key or ()), partial=key is not None
            )
        if isinstance(expr, ra.Unit):
            return Unit()
        raise AssertionError(f"cannot build {type(expr).__name__} at the root: {expr!r}")

    def _is_source(self, expr: ra.Expr) -> TypeGuard[ra.Scan]:
        """Whether `expr` is a Scan built as a SourceIndex (a source or a hidden relation)."""
        return isinstance(expr, ra.Scan) and (
            expr.relation in self.hidden or self.relations[expr.relation].kind != "derived"
        )

    def _pushable(self, expr: ra.Select) -> dict[ra.Compare, tuple[str, Any]]:
        """The predicates of `expr` of the form `attribute == constant` on a source's own
        attribute, each with its (attribute, constant) filter, when `expr` selects from a
        source Scan (or its content id extension)."""
        scan = expr.input.input if isinstance(expr.input, ra.CidExtend) else expr.input
        if not self._is_source(scan):
            return {}
        pushed: dict[ra.Compare, tuple[str, Any]] = {}
        for p in expr.predicates:
            left, right = p.left, p.right
            if isinstance(left, ra.Const) and isinstance(right, ra.Col):
                left, right = right, left
            if (
                p.op == "=="
                and isinstance(left, ra.Col)
                and isinstance(right, ra.Const)
                and left.name in scan.schema
                and all(a != left.name for a, _ in pushed.values())  # one constant per attribute
                # NaN equals nothing in Python but itself in Spark: leave it to a Filter.
                and not (isinstance(right.value, float) and math.isnan(right.value))
            ):
                pushed[p] = (left.name, right.value)
        return pushed

    def _source_index(self, expr: ra.Scan, key: Key, filters: Filters) -> SourceIndex:
        return SourceIndex(
            expr.relation,
            expr.schema,
            _positions(expr.schema, key or ()),
            self.fetch,
            partial=key is not None,
            filters=filters,
        )

    @staticmethod
    def _map(parent: Node, expr: ra.Project) -> Map:
        return Map(
            parent,
            expr.schema,
            [
                Column(parent.schema.index(o.name)) if isinstance(o, ra.Col) else Constant(o.value)
                for _, o in expr.outputs
            ],
        )

    # -- recursive strata -------------------------------------------------------

    def child(self, fixpoint: ra.Fixpoint) -> Child:
        """The stratum's Child circuit (built once per reader circuit)."""
        existing = self._children.get(id(fixpoint))
        if existing is not None:
            return existing
        loop = _Loop(fixpoint)
        results = [self.inner(body, loop) for body in fixpoint.bodies]
        for name, result in zip(fixpoint.relations, results, strict=True):
            loop.feedbacks[name].connect(result)
        child = Child(results, mode="incremental")
        self._children[id(fixpoint)] = child
        return child

    def inner(self, expr: ra.Expr, loop: _Loop) -> Node:
        """`expr` as a stream of 2-D deltas inside `loop`'s child circuit."""
        node = loop.nodes.get(id(expr))
        if node is None:
            node = loop.nodes[id(expr)] = self._inner(expr, loop)
        return node

    def _indexed_join(
        self,
        left: Node,
        right: Node,
        left_on: tuple[int, ...],
        right_on: tuple[int, ...],
        combine: Callable[[Row, Row], Row],
        schema: tuple[str, ...],
    ) -> Node:
        return incremental_join(
            IndexWith(left, lambda row: project(row, left_on), str(left_on)),
            IndexWith(right, lambda row: project(row, right_on), str(right_on)),
            lambda key, a, b: combine(a, b),  # type: ignore[arg-type]
            schema,
        )

    def _inner(self, expr: ra.Expr, loop: _Loop) -> Node:
        if not ra.mentions_recur(expr):
            # A lower-stratum part: built outside (full) and imported into the child.
            return Import(self.build(expr, None))
        if isinstance(expr, ra.Recur):
            return loop.feedbacks[expr.relation]
        if isinstance(expr, ra.CidExtend):
            parent = self.inner(expr.input, loop)
            return Extend(parent, ra.CID_COLUMN, _row_cid(expr.relation, expr.input.schema), expr.relation)
        if isinstance(expr, ra.Select):
            return Filter(self.inner(expr.input, loop), _predicate(expr.schema, expr.predicates))
        if isinstance(expr, ra.Project):
            return self._map(self.inner(expr.input, loop), expr)
        if isinstance(expr, (ra.Join, ra.SemiJoin)):
            left, right = self.inner(expr.left, loop), self.inner(expr.right, loop)
            on = expr.on
            rest = tuple(i for i, c in enumerate(right.schema) if c not in on)
            return self._indexed_join(
                left,
                right,
                _positions(left.schema, on),
                _positions(right.schema, on),
                lambda a, b: a + tuple(b[i] for i in rest),
                expr.schema,
            )
        if isinstance(expr, ra.Difference):
            return Minus(self.inner(expr.left, loop), self.inner(expr.right, loop))
        if isinstance(expr, ra.Aggregate):
            return self._inner_aggregate(expr, loop)
        if isinstance(expr, ra.Union):
            return Union(tuple(self.inner(i, loop) for i in expr.inputs))
        if isinstance(expr, ra.Distinct):
            parent = self.inner(expr.input, loop)
            return DistinctTrace(parent, Z1Trace(TraceAppend(parent)))
        raise AssertionError(f"cannot build {type(expr).__name__} inside a fixpoint: {expr!r}")

    def _inner_aggregate(self, expr: ra.Aggregate, loop: _Loop) -> Node:
        """body (recursive) extended with an aggregate over a lower-stratum atom.

        Outside the child: G, one row (group..., value) per non-empty group with a
        value, and the non-empty groups' keys. Inside: body ⋈ G, plus, when the
        empty group has a value (count, sum: 0), the body rows whose group is not
        among the non-empty ones, with that value.
        """
        assert not ra.mentions_recur(expr.atom), "stratification: an aggregate reads a lower stratum"
        body = self.inner(expr.body, loop)
        atom = self.build(expr.atom, None)
        group = expr.group
        atom_group = _positions(atom.schema, group)
        function, value_col = self.aggregate_function(expr, atom.schema)
        values = IndexWith(atom, lambda row: project(row, atom_group), "group")
        per_group = Aggregate(
            values,
            function,
            None if value_col is None else (lambda row, c=value_col: row[c]),
            lambda key, value: key + (value,),  # type: ignore[operator]
            schema=group + (expr.result,),
        )
        width = len(group)
        body_group = _positions(body.schema, group)
        joined = self._indexed_join(
            body,
            Import(per_group),
            body_group,
            tuple(range(width)),
            lambda b, g: b + (g[-1],),
            expr.schema,
        )
        empty = make(function)().result()
        if empty is NO_VALUE:
            return joined
        keys = DistinctIncremental(
            Map(atom, group, [Column(i) for i in atom_group]), (), partial=False
        )
        matched = self._indexed_join(
            body, Import(keys), body_group, tuple(range(width)), lambda b, g: b, body.schema
        )
        unmatched = Minus(body, matched)
        padded = Map(
            unmatched,
            expr.schema,
            [Column(i) for i in range(len(body.schema))] + [Constant(empty)],
        )
        return Union((joined, padded))

    # -- readers ------------------------------------------------------------------

    def reader(self, relation: str, key: tuple[str, ...]) -> Circuit:
        """A hydrated circuit whose reader answers `relation` by the `key` attributes."""
        parent = self.build(self.exprs[relation], key or None)
        reader = Reader(parent, _positions(parent.schema, key), partial=bool(key) and self.allow_partial)
        circuit = Circuit(reader)
        circuit.hydrate()
        return circuit
