"""Pass 5 of 6: a KeyedPlan (provenance.py) -> PomoFlow nodes, for the readers of one graph.

Non-recursive strata are DAGs of root operators, built from the key provenance pass: an
operator planned with a key is partial (its state keyed by it; a join or aggregate keyed
on the side the key traces to), one planned with None is full and hydrated once with a
scan. A cyclic rule body (a MultiJoin, planner/ir/cyclic.py, unless `binary_joins`) is one
WcojJoin, full (keyed readers: planner/demand/). Nodes are memoized per (operator, key),
and the memo lives as long as the builder, so every reader of one graph shares the states
of their common sub-plans (one state per operator and key columns). Building is
iterative: no recursion per operator or per chained relation. `rollback()` forgets the
nodes built since the last `commit()`, for a reader whose graph could not take it yet.

A recursive stratum (ra.Fixpoint) becomes one Child circuit per builder, in incremental
mode and FULL (DESIGN §3): a Feedback per recursive relation, the union of its rule
bodies, a DistinctTrace on each result, incremental joins of IndexWith streams. Every part
of a body that reads no recursive relation is built outside the child (full) and
imported. Inside, negation is a difference (lower.expand_negations) and an aggregate over
a lower-stratum atom is computed outside (one row per non-empty group) and joined in; the
value of an empty group (0 for count and sum) is added for the body rows whose group has
no atom row. The child's results are read through ChildOutput (full), and the child
hydrates with the circuit (Circuit.hydrate calls Child.hydrate).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Fetch, Filters, Node, project
from pomoview.dataflow.operators.aggregate import Aggregate
from pomoview.dataflow.operators.aggregate_join import AggregateJoin
from pomoview.dataflow.operators.antijoin import AntiJoin
from pomoview.dataflow.operators.child import Child, ChildOutput
from pomoview.dataflow.operators.distinct_incremental import DistinctIncremental
from pomoview.dataflow.operators.distinct_trace import DistinctTrace
from pomoview.dataflow.operators.extend import Extend
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.filter import COMPARE, Filter
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.operators.join import Join
from pomoview.dataflow.operators.join_trace import incremental_join
from pomoview.dataflow.operators.map import Column, Constant, Map
from pomoview.dataflow.operators.minus import Minus
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.source_window import SourceWindow
from pomoview.dataflow.operators.top_k import OrderColumns, TopK
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.unit import Unit
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.state.aggregates import NO_VALUE, UserAggregate, make
from pomoview.dataflow.state.collection_index import IndexRegistry
from pomoview.dataflow.state.keyed_state import Row
from pomoview.planner.builder.multi_join import multi_join, nested_multi_join
from pomoview.planner.frontend.cid import cid
from pomoview.planner.frontend.relations import ViewOrder
from pomoview.planner.frontend.validate import Relation
from pomoview.planner.ir import ra
from pomoview.planner.ir.cyclic import multi_joins
from pomoview.planner.ir.provenance import Key, Keyed, Provenance
from pomoview.planner.ir.windows import SourceWindowPlan, source_window

UserFunction = Callable[[list[tuple[Any, ...]]], object]


def _positions(schema: tuple[str, ...], names: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(schema.index(n) for n in names)


def _predicate(schema: tuple[str, ...], predicates: tuple[ra.Compare, ...]) -> Callable[[Row], bool]:
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
        self.feedbacks = {name: Feedback(fixpoint.schema_of(name)) for name in fixpoint.relations}
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
        binary_joins: bool = False,
    ) -> None:
        """`binary_joins` keeps every rule body a chain of binary joins (no MultiJoin): the
        comparison run of `serve --binary-joins`."""
        self.allow_partial = partial
        self.binary_joins = binary_joins
        self.relations = relations
        self.exprs = self._physical(exprs)
        self.fetch = fetch
        self.hidden = hidden or {}
        self.aggregates = aggregates or {}
        self._children: dict[int, Child] = {}  # id(Fixpoint) -> its Child
        self.provenance = Provenance(self._resolve, self._is_source)
        self._nodes: dict[int, Node] = {}  # id(Keyed) -> its node: one per (operator, key)
        self._added: list[int] = []  # memo entries since the last commit
        self._added_children: list[int] = []
        self.indexes = IndexRegistry()  # the WcojJoins' indexes, shared by input node
        # One SourceIndex per (source, schema, key columns, filters, partial): `_source_index`.
        self._sources: dict[tuple[object, ...], SourceIndex] = {}
        self._added_sources: list[tuple[object, ...]] = []

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
        """The node computing `expr`, upqueried by `key` (None: full), built with its inputs."""
        if key == () or not self.allow_partial:
            key = None
        root = self.provenance.plan(expr, key)
        # Post-order without recursion: a node is built once its inputs are.
        stack: list[tuple[Keyed, bool]] = [(root, False)]
        on_path: set[int] = set()
        while stack:
            keyed, ready = stack.pop()
            if id(keyed) in self._nodes:
                continue
            inputs = [] if keyed.pushed else keyed.inputs
            if not ready:
                if id(keyed) in on_path:
                    raise AssertionError(f"{keyed.expr!r} depends on itself outside a recursive stratum")
                on_path.add(id(keyed))
                stack.append((keyed, True))
                stack.extend((i, False) for i in reversed(inputs) if id(i) not in self._nodes)
                continue
            on_path.discard(id(keyed))
            node = self._construct(keyed, [self._nodes[id(i)] for i in inputs])
            if node.origin is None:  # a source index shared by several plans keeps its first
                node.origin = keyed
            self._nodes[id(keyed)] = node
            self._added.append(id(keyed))
        return self._nodes[id(root)]

    def extend(self, relations: Mapping[str, Relation], exprs: Mapping[str, ra.Expr]) -> None:
        """Adds the relations of an extended program (a demand extension's, planner/demand/),
        keeping the expressions of those it has: their nodes stay shared."""
        self.relations = {**relations, **self.relations}
        new = {name: expr for name, expr in exprs.items() if name not in self.exprs}
        self.exprs = {**self._physical(new), **self.exprs}

    def _physical(self, exprs: Mapping[str, ra.Expr]) -> dict[str, ra.Expr]:
        """The expressions to build: cyclic bodies as MultiJoins unless `binary_joins`. Run
        once per expression and builder, since nodes are memoized by expression object."""
        return dict(exprs) if self.binary_joins else multi_joins(exprs)

    def commit(self) -> None:
        self._added.clear()
        self._added_children.clear()
        self._added_sources.clear()
        self.indexes.commit()

    def rollback(self) -> None:
        for key in self._added:
            self._nodes.pop(key, None)
        for key in self._added_children:
            self._children.pop(key, None)
        for memo in self._added_sources:
            self._sources.pop(memo, None)
        self.indexes.rollback()
        self.commit()

    def _construct(self, keyed: Keyed, ins: list[Node]) -> Node:
        expr, key = keyed.expr, keyed.key
        if isinstance(expr, ra.Scan):
            return self._source_index(expr, key, ())
        if isinstance(expr, ra.Recursive):
            # Full whatever the key: the node below upqueries the child's totals.
            child = self.child(expr.fixpoint)
            return ChildOutput(child, expr.fixpoint.relations.index(expr.relation))
        if isinstance(expr, ra.CidExtend):
            return Extend(ins[0], ra.CID_COLUMN, _row_cid(expr.relation, expr.input.schema), expr.relation)
        if isinstance(expr, ra.Select):
            return self._select(keyed, expr, ins)
        if isinstance(expr, ra.Project):
            return self._map(ins[0], expr)
        if isinstance(expr, (ra.Join, ra.SemiJoin, ra.AntiJoin)):
            return self._join(keyed, expr, ins)
        if isinstance(expr, ra.Difference):
            return Minus(ins[0], ins[1])
        if isinstance(expr, ra.Aggregate):
            return self._aggregate(keyed, expr, ins)
        if isinstance(expr, ra.Union):
            return Union(tuple(ins))
        if isinstance(expr, ra.MultiJoin):
            return multi_join(expr, ins, self.indexes)
        if isinstance(expr, ra.Distinct):
            return DistinctIncremental(ins[0], _positions(ins[0].schema, key or ()), partial=key is not None)
        if isinstance(expr, ra.Unit):
            return Unit()
        raise AssertionError(f"cannot build {type(expr).__name__} at the root: {expr!r}")

    def _select(self, keyed: Keyed, expr: ra.Select, ins: list[Node]) -> Node:
        if not keyed.pushed:
            label = " and ".join(f"{p.left} {p.op} {p.right}" for p in expr.predicates)
            return Filter(ins[0], _predicate(expr.schema, expr.predicates), label)
        # `attr == constant` over a source: the SourceIndex (and its fetches) select
        # the matching tuples; the other predicates stay in a Filter above it.
        filters = tuple(dict.fromkeys(keyed.pushed.values()))
        scan = expr.input
        scan_key = keyed.inputs[0].key
        below: Node
        if isinstance(scan, ra.CidExtend):
            assert isinstance(scan.input, ra.Scan)
            index = self._source_index(scan.input, scan_key, filters)
            below = Extend(index, ra.CID_COLUMN, _row_cid(scan.relation, scan.input.schema), scan.relation)
        else:
            assert isinstance(scan, ra.Scan)
            below = self._source_index(scan, scan_key, filters)
        rest = tuple(p for p in expr.predicates if p not in keyed.pushed)
        if not rest:
            return below
        label = " and ".join(f"{p.left} {p.op} {p.right}" for p in rest)
        return Filter(below, _predicate(expr.schema, rest), label)

    @staticmethod
    def _join(keyed: Keyed, expr: ra.Join | ra.SemiJoin | ra.AntiJoin, ins: list[Node]) -> Node:
        key = keyed.key
        left, right = ins
        if key is None:
            on = expr.on
            node = AntiJoin if isinstance(expr, ra.AntiJoin) else Join
            lpos, rpos = _positions(left.schema, on), _positions(right.schema, on)
            return node(left, right, lpos, rpos, partial=False)
        # The join columns in the key's order when the key is them (both sides keyed alike).
        on = key if expr.on and set(key) == set(expr.on) else expr.on
        side = keyed.side or 0
        side_key = _positions(ins[side].schema, key)
        other_partial = keyed.inputs[1 - side].key is not None
        if isinstance(expr, ra.AntiJoin):
            return AntiJoin(
                left,
                right,
                _positions(left.schema, on),
                _positions(right.schema, on),
                partial=True,
                side_key=side_key,
                other_partial=other_partial,
            )
        return Join(
            left,
            right,
            _positions(left.schema, on),
            _positions(right.schema, on),
            partial=True,
            keyed_side=side,
            side_key=side_key,
            other_partial=other_partial,
        )

    def _aggregate(self, keyed: Keyed, expr: ra.Aggregate, ins: list[Node]) -> Node:
        key = keyed.key
        body, atom = ins
        group = key if key is not None and expr.group and set(key) == set(expr.group) else expr.group
        function, value_col = self.aggregate_function(expr, atom.schema)
        return AggregateJoin(
            body,
            atom,
            _positions(body.schema, group),
            _positions(atom.schema, group),
            value_col,
            function,
            expr.result,
            partial=key is not None,
            side_key=None if key is None else _positions(body.schema, key),
            other_partial=keyed.inputs[1].key is not None,
        )

    def _is_source(self, expr: ra.Expr) -> bool:
        """Whether `expr` is a Scan built as a SourceIndex (a source or a hidden relation)."""
        return isinstance(expr, ra.Scan) and (
            expr.relation in self.hidden or self.relations[expr.relation].kind != "derived"
        )

    def _resolve(self, scan: ra.Scan) -> ra.Expr | None:
        """A derived relation's expression (built in place), or None for a source."""
        return None if self._is_source(scan) else self.exprs[scan.relation]

    def _source_index(self, expr: ra.Scan, key: Key, filters: Filters) -> SourceIndex:
        """The graph's one SourceIndex of `expr`'s source by these key columns and filters:
        every atom and rule reading the source alike shares its state (one state per
        operator and key, DESIGN §3), where each built its own: a closure's two rules held
        two whole copies of `e`, each fetched whole."""
        cols = _positions(expr.schema, key or ())
        memo = (expr.relation, expr.schema, cols, tuple(filters), key is not None)
        found = self._sources.get(memo)
        if found is None:
            partial = key is not None
            found = SourceIndex(
                expr.relation, expr.schema, cols, self.fetch, partial=partial, filters=filters
            )
            self._sources[memo] = found
            self._added_sources.append(memo)
        return found

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
        self._added_children.append(id(fixpoint))
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
        combine: Callable[[Any, Any, Any], Row],
        schema: tuple[str, ...],
    ) -> Node:
        # Key functions and `combine` run per row and joined pair: no wrapper calls (profiled).
        return incremental_join(
            IndexWith(left, _getter(left_on), str(left_on)),
            IndexWith(right, _getter(right_on), str(right_on)),
            combine,
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
                _extended_by(rest),
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
        if isinstance(expr, ra.MultiJoin):  # a cycle through the recursion (cyclic.py)
            return nested_multi_join(expr, [self.inner(atom, loop) for atom, _ in expr.atoms])
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
            None if value_col is None else operator.itemgetter(value_col),
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
            lambda _, b, g: b + (g[-1],),
            expr.schema,
        )
        empty = make(function)().result()
        if empty is NO_VALUE:
            return joined
        keys = DistinctIncremental(Map(atom, group, [Column(i) for i in atom_group]), (), partial=False)
        matched = self._indexed_join(
            body, Import(keys), body_group, tuple(range(width)), lambda _, b, g: b, body.schema
        )
        unmatched = Minus(body, matched)
        padded = Map(
            unmatched,
            expr.schema,
            [Column(i) for i in range(len(body.schema))] + [Constant(empty)],
        )
        return Union((joined, padded))

    # -- readers ------------------------------------------------------------------

    def reader_node(
        self,
        relation: str,
        key: tuple[str, ...],
        order: ViewOrder | None = None,
        *,
        gate: Callable[[Node, tuple[int, ...]], Node] | None = None,
    ) -> Reader:
        """A new Reader answering `relation` by the `key` attributes, over shared nodes; a
        TopK for a view with an `order` (its rows per key in that order, up to its limit).

        With a `gate` (a demanded relation, planner/demand/): `relation` is built full, since
        its rules compute only demanded keys, and the reader reads it through the node
        `gate(parent, key_cols)`, which demands each key it fills."""
        partial = bool(key) and self.allow_partial
        if order is not None and order.limit is not None and partial and gate is None:
            window = self._source_window(relation, key, order)
            if window is not None:
                return window
        parent = self.build(self.exprs[relation], None if gate is not None else key or None)
        key_cols = _positions(parent.schema, key)
        if gate is not None:
            parent = gate(parent, key_cols)
        if order is None:
            return Reader(parent, key_cols, partial=partial)
        columns = _order_columns(parent.schema, order)
        return TopK(parent, key_cols, partial=partial, order=columns, limit=order.limit)

    def _source_window(self, relation: str, key: tuple[str, ...], order: ViewOrder) -> TopK | None:
        """The TopK of an ordered view with a limit over a SourceWindow of its own (not
        shared: it holds only each key's first rows), when planner/ir/windows.py finds the
        view's rows to be one source's tuples; else None."""
        assert order.limit is not None
        expr = self.exprs[relation]
        plan = source_window(expr, self.relations, self.hidden)
        if not isinstance(plan, SourceWindowPlan):
            return None
        schema = expr.schema
        key_cols = _positions(schema, key)
        columns = _order_columns(schema, order)
        window = SourceWindow(
            plan.source,
            plan.attributes,
            plan.columns,
            schema,
            key_cols,
            self.fetch,
            order=columns,
            limit=order.limit,
            filters=plan.filters,
        )
        # Its rows are the view's (for a from-scratch check of its state: tests/planner).
        window.origin = self.provenance.plan(expr, key)
        return TopK(window, key_cols, partial=True, order=columns, limit=order.limit)

    def reader(self, relation: str, key: tuple[str, ...], order: ViewOrder | None = None) -> Circuit:
        """A hydrated circuit of its own whose reader answers `relation` by the `key` attributes."""
        circuit = Circuit(self.reader_node(relation, key, order))
        circuit.hydrate()
        return circuit


def _order_columns(schema: tuple[str, ...], order: ViewOrder) -> OrderColumns:
    """The view's order as (column position, descending) pairs of `schema`."""
    names = tuple(a for a, _ in order.by)
    return tuple(zip(_positions(schema, names), (d for _, d in order.by), strict=True))


def _getter(cols: tuple[int, ...]) -> Callable[[Row], Any]:
    """`project(row, cols)` as one call: the key of a row."""
    c = cols[0] if len(cols) == 1 else None
    if c is not None:
        return lambda row: (row[c],)
    return operator.itemgetter(*cols) if cols else (lambda _: ())


def _extended_by(rest: tuple[int, ...]) -> Callable[[Any, Any, Any], Row]:
    """A join's output row: the left row, then the right row's columns `rest`."""
    if len(rest) == 1:
        (i,) = rest
        return lambda _, a, b: a + (b[i],)
    get = operator.itemgetter(*rest) if len(rest) > 1 else None
    return (lambda _, a, b: a + get(b)) if get is not None else (lambda _, a, b: a)
