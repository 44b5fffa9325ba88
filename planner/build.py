"""Pass 4: PomoRA -> a PomoFlow circuit for one reader (view, key attributes).

Partial eligibility (DESIGN §3, key provenance): the builder walks from the
reader to the sources carrying the key the node below will upquery by. Each
operator passes the key to its inputs when the key traces through it:

- filters and unions pass it unchanged; projections translate it to the
  columns it copies (constant columns filter instead, and drop out);
- a join passes it on when the key is exactly its join columns, and an
  aggregate when the key is exactly its group columns (both sides are then
  filled together for a key);
- otherwise the key is lost: that operator and everything above it is full,
  hydrated once with one scan of each source.

So every partial state has only partial states (or the reader) below it, and
a full state never sits below a partial one (Noria's eligibility rule).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.keyed_state import Row
from pomoview.dataflow.node import Fetch, Node
from pomoview.dataflow.operators.aggregate_join import AggregateJoin
from pomoview.dataflow.operators.distinct_incremental import DistinctIncremental
from pomoview.dataflow.operators.filter import Filter
from pomoview.dataflow.operators.join import Join
from pomoview.dataflow.operators.map import Column, Constant, Map
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.unit import Unit

from . import ra
from .validate import CheckedProgram

Key = tuple[str, ...] | None  # column names the node below upqueries by; None = full

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


class CircuitBuilder:
    def __init__(self, program: CheckedProgram, exprs: dict[str, ra.Expr], fetch: Fetch) -> None:
        self.program = program
        self.exprs = exprs
        self.fetch = fetch

    def build(self, expr: ra.Expr, key: Key) -> Node:
        if key == ():
            key = None
        if isinstance(expr, ra.Scan):
            relation = self.program.relations[expr.relation]
            if relation.kind == "derived":
                return self.build(self.exprs[expr.relation], key)
            return SourceIndex(
                expr.relation,
                expr.schema,
                _positions(expr.schema, key or ()),
                self.fetch,
                partial=key is not None,
            )
        if isinstance(expr, ra.Select):
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
            return Map(
                parent,
                expr.schema,
                [
                    Column(parent.schema.index(o.name))
                    if isinstance(o, ra.Col)
                    else Constant(o.value)
                    for _, o in expr.outputs
                ],
            )
        if isinstance(expr, ra.Join):
            inner = _key_through(key, expr.on)
            on = inner or expr.on
            left, right = self.build(expr.left, inner), self.build(expr.right, inner)
            return Join(
                left,
                right,
                _positions(left.schema, on),
                _positions(right.schema, on),
                partial=inner is not None,
            )
        if isinstance(expr, ra.Aggregate):
            inner = _key_through(key, expr.group)
            group = inner or expr.group
            body, atom = self.build(expr.body, inner), self.build(expr.atom, inner)
            partial = inner is not None
            return AggregateJoin(
                body,
                atom,
                _positions(body.schema, group),
                _positions(atom.schema, group),
                atom.schema.index(expr.value) if expr.value is not None else None,
                expr.function,
                expr.result,
                partial=partial,
            )
        if isinstance(expr, ra.Union):
            return Union(tuple(self.build(i, key) for i in expr.inputs))
        if isinstance(expr, ra.Distinct):
            parent = self.build(expr.input, key)
            return DistinctIncremental(parent, _positions(parent.schema, key or ()), partial=key is not None)
        if isinstance(expr, ra.Unit):
            return Unit()
        raise AssertionError(f"unknown expression {expr!r}")

    def reader(self, relation: str, key: tuple[str, ...]) -> Circuit:
        """A hydrated circuit whose reader answers `relation` by the `key` attributes."""
        parent = self.build(self.exprs[relation], key or None)
        reader = Reader(parent, _positions(parent.schema, key), partial=bool(key))
        circuit = Circuit(reader)
        circuit.hydrate()
        return circuit
