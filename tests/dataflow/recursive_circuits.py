"""Recursive circuits built two ways: incrementally over nested time, and from scratch.

Each builder returns (circuit, outputs). The incremental form is the DBSP
construction (δ0 imports, incremental joins of traces, DistinctTrace, outputs
summed over the iterations); the reference form recomputes the fixed point from
the whole relations every epoch with the non-incremental operators (JoinStream,
Distinct, constant imports, a loop that stops when its feedback repeats).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.child import Child, ChildOutput
from pomoview.dataflow.operators.distinct_trace import DistinctTrace
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.join_stream import JoinFn, JoinStream
from pomoview.dataflow.operators.join_trace import incremental_join
from pomoview.dataflow.operators.map import MapFn
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.reference.distinct import Distinct

PAIR = ("x", "y")


def second(row: tuple[Hashable, ...]) -> Hashable:
    return row[1]


def first(row: tuple[Hashable, ...]) -> Hashable:
    return row[0]


def compose(key: Hashable, left: Hashable, right: Hashable) -> Hashable:
    """(x, y) joined with (y, z) on y gives (x, z)."""
    return (left[0], right[1])  # type: ignore[index]


class Builder:
    """Picks the incremental or the non-incremental form of each recursive building block."""

    def __init__(self, incremental: bool) -> None:
        self.incremental = incremental

    def join(self, left: Node, right: Node, join_fn: JoinFn) -> Node:
        lkey, rkey = IndexWith(left, second), IndexWith(right, first)
        if self.incremental:
            return incremental_join(lkey, rkey, join_fn, PAIR)
        return JoinStream(lkey, rkey, join_fn, PAIR)

    def distinct(self, node: Node) -> Node:
        if self.incremental:
            return DistinctTrace(node, Z1Trace(TraceAppend(node)))
        return Distinct(node)

    def child(self, outputs: list[Node]) -> Child:
        return Child(outputs, mode="incremental" if self.incremental else "iterate")


def closure_child(b: Builder, edges: Node) -> Child:
    """tc(x, z) :- edge(x, z).  tc(x, z) :- tc(x, y), edge(y, z)."""
    edge = Import(edges)
    tc = Feedback(PAIR)
    result = b.distinct(Union((edge, b.join(tc, edge, compose))))
    tc.connect(result)
    return b.child([result])


def transitive_closure(incremental: bool) -> tuple[Circuit, list[ChildOutput]]:
    child = closure_child(Builder(incremental), Input("edge", PAIR))
    out = child.output(0)
    return Circuit([out]), [out]


def even_odd_paths(incremental: bool) -> tuple[Circuit, list[ChildOutput]]:
    """Two mutually recursive relations over one child circuit.

    odd(x, z)  :- edge(x, z).
    odd(x, z)  :- edge(x, y), even(y, z).
    even(x, z) :- edge(x, y), odd(y, z).
    """
    b = Builder(incremental)
    edge = Import(Input("edge", PAIR))
    odd, even = Feedback(PAIR), Feedback(PAIR)
    odd_result = b.distinct(Union((edge, b.join(edge, even, compose))))
    even_result = b.distinct(b.join(edge, odd, compose))
    odd.connect(odd_result)
    even.connect(even_result)
    child = b.child([odd_result, even_result])
    outputs = [child.output(0), child.output(1)]
    return Circuit(outputs), outputs


def closure_of_reversed_closure(incremental: bool) -> tuple[Circuit, list[ChildOutput]]:
    """A child inside a child, so that times have three components (epoch, i, j).

    p(x, y) :- base(x, y).   p(y, x) :- tc_p(x, y).   where tc_p is the transitive
    closure of p, computed by an inner recursive circuit at every outer iteration.
    """
    b = Builder(incremental)
    base = Import(Input("base", PAIR))
    p = Feedback(PAIR)
    inner = closure_child(b, p)
    reversed_tc = MapFn(inner.output(0), PAIR, lambda row: (row[1], row[0]))
    result = b.distinct(Union((base, reversed_tc)))
    p.connect(result)
    child = b.child([result])
    out = child.output(0)
    return Circuit([out]), [out]


Build = Callable[[bool], tuple[Circuit, list[ChildOutput]]]


def python_closure(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    reach = set(edges)
    while True:
        more = {(x, w) for (x, y) in reach for (y2, w) in edges if y == y2} - reach
        if not more:
            return reach
        reach |= more
