"""The demanded readers of one graph: which readers the demand transformation serves, and
the gates and demand sources it gives them.

A reader (view, key) of a view that depends on recursion is built from the program
extended for it (extend.py): its relation is the adorned copy, full but holding the rows of
demanded keys only, read through a DemandGate (dataflow/operators/demand_gate.py) that
inserts each key it fills into the demand source and retracts those evicted below. A
demand source lives here, not in the store: the graph's fetch answers it as empty (the
graph hydrates it before anything is demanded), and its changes are steps of the graph.

Readers of views that read no recursion keep the plain plan: their partial states already
fetch only what a key needs, which the rewrite, whose states are full, would not. A
reader the rewrite refuses (magic.Full) keeps the plain plan too, with the reason kept for
`explain`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pomoview.dataflow.node import Fetch, Filters, Node
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.builder.circuit_builder import CircuitBuilder
from pomoview.planner.demand.extend import Extension, extend, recursion_reached
from pomoview.planner.demand.magic import Full
from pomoview.planner.frontend.relations import CheckedProgram
from pomoview.planner.ir.provenance import Keyed

ViewKey = tuple[str, tuple[str, ...]]
Gate = Callable[[Node, tuple[int, ...]], Node]
Step = Callable[[Mapping[str, ZSet[Row]]], object]


class DemandedReaders:
    def __init__(self, checked: CheckedProgram, builder: CircuitBuilder, step: Step) -> None:
        self._checked = checked  # the program with every extension so far
        self._builder = builder
        self._step = step
        self._extensions: dict[ViewKey, Extension] = {}
        self.full: dict[ViewKey, str] = {}  # readers of recursive views left plain, and why
        self.sources: set[str] = set()

    def plan(self, view: str, key: tuple[str, ...]) -> tuple[str, Gate] | None:
        """The relation to build the reader of `view` by `key` from, and its gate; None
        for the plain plan (see the module docstring)."""
        name = (view, key)
        extension = self._extensions.get(name)
        if extension is None:
            if not key or recursion_reached(self._checked, view) is None:
                return None
            found = extend(self._checked, view, key)
            if isinstance(found, Full):
                self.full[name] = found.reason
                return None
            extension = self._extensions[name] = found
            self._checked = found.checked
            self._builder.extend(found.checked.relations, found.exprs)
            self.sources.add(found.demanded.demand)
        demanded = extension.demanded
        # The demand source's attributes are the key's in the view's order.
        order = tuple(key.index(a) for a in demanded.key)

        def push(delta: ZSet[Row]) -> None:
            rows = ZSet([(tuple(k[i] for i in order), w) for k, w in delta.items()])
            self._step({demanded.demand: rows})

        def gate(parent: Node, cols: tuple[int, ...]) -> Node:
            node = DemandGate(parent, cols, demanded.demand, push)
            # Its rows are the view's, by key: what a recomputation from scratch checks.
            node.origin = Keyed(self._builder.exprs[view], None)
            return node

        return demanded.relation, gate

    def fetch(self, fetch: Fetch) -> Fetch:
        """`fetch`, answering the demand sources (empty: see the module docstring)."""

        def demand_or(
            source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
        ) -> Iterable[Row] | None:
            return [] if source in self.sources else fetch(source, cols, keys, filters)

        return demand_or
