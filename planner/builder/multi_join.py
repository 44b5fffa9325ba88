"""The WcojJoin node of a MultiJoin (planner/ir/cyclic.py): its atoms' terms and
constraints in the operator's own terms (dataflow/operators/wcoj.py)."""

from __future__ import annotations

from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.nested_wcoj import NestedWcoj
from pomoview.dataflow.operators.wcoj import Compare as WcojCompare
from pomoview.dataflow.operators.wcoj import Const as WcojConst
from pomoview.dataflow.operators.wcoj import Term, WcojJoin
from pomoview.dataflow.state.collection_index import IndexRegistry
from pomoview.planner.ir import ra


def _label(expr: ra.Expr) -> str | None:
    """The relation an atom's input reads, for `explain` (None: not a plain scan)."""
    while isinstance(expr, (ra.Project, ra.Select, ra.CidExtend)):
        expr = expr.input
    return expr.relation if isinstance(expr, (ra.Scan, ra.Recur)) else None


def multi_join(expr: ra.MultiJoin, ins: list[Node], indexes: IndexRegistry) -> WcojJoin:
    """The WcojJoin of a MultiJoin over its atoms' nodes (`ins`, one per atom: an input
    read by several atoms is one node, which the WcojJoin indexes once, and so do the
    graph's joins reading it, through `indexes`)."""
    atoms: list[tuple[Term, ...]] = []
    for (atom, terms), node in zip(expr.atoms + expr.negated, ins, strict=True):
        assert node.schema == atom.schema, (node.schema, atom.schema)
        atoms.append(tuple(t if isinstance(t, str) else WcojConst(t.value) for t in terms))
    constraints = []
    for c in expr.constraints:
        assert isinstance(c.left, ra.Col), "cyclic.py puts a variable on the left"
        right = c.right.name if isinstance(c.right, ra.Col) else WcojConst(c.right.value)
        constraints.append(WcojCompare(c.left.name, c.op, right))
    labels = tuple(_label(atom) or f"#{i}" for i, (atom, _) in enumerate(expr.atoms + expr.negated))
    return WcojJoin(
        tuple(ins),
        tuple(atoms),
        expr.variables,
        tuple(constraints),
        labels,
        negated=len(expr.negated),
        indexes=indexes,
    )


def nested_multi_join(expr: ra.MultiJoin, ins: list[Node]) -> NestedWcoj:
    """The NestedWcoj of a MultiJoin inside a recursion (cyclic.py: one atom reads the
    recursion, its node the loop's stream; the others' nodes Imports): a WcojJoin of the
    MultiJoin per iteration."""
    assert not expr.negated, "inside a loop a negation is a difference (lower.expand_negations)"
    (recursive,) = [i for i, (atom, _) in enumerate(expr.atoms) if ra.mentions_recur(atom)]

    def join(inputs: tuple[Node, ...], indexes: IndexRegistry) -> WcojJoin:
        return multi_join(expr, list(inputs), indexes)

    return NestedWcoj(tuple(ins), recursive, join)
