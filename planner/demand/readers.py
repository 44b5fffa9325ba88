"""The demanded readers of one graph: which readers the demand transformation serves, and
the gates and demand sources it gives them.

A reader (view, key) of a view that depends on recursion is built from the program
extended for it (extend.py): its relation is the adorned copy, full but holding the rows of
demanded keys only, read through a DemandGate (dataflow/operators/demand_gate.py) that
inserts each key it fills into the demand source and retracts those evicted below. A
demand source lives here, not in the store: the graph's fetch answers it as empty (the
graph hydrates it before anything is demanded), and its changes are steps of the graph.

A base source the demanded rules read by bound attributes is read through a slice
(magic.py, "Slices"; dataflow/operators/source_slice.py) unless `hold_whole` says it is
small enough to hold whole, which the graph then hydrates once: the server decides by the
store's row counts and its `--whole-source-rows` flag; `choices` says what each reader got.

Readers of views that read no recursion keep the plain plan: their partial states already
fetch only what a key needs, which the rewrite, whose states are full, would not; but for a
view that reads a cyclic body (a MultiJoin, planner/ir/cyclic.py) from a source too large
to hold whole. Its WcojJoin is full whatever the key (provenance.py), so the plain plan
hydrates the whole source and its indexes at a keyed view's first lookup; the rewrite guards
the body by the demanded keys and reads its sources through slices, so the join holds the
demanded keys' neighbourhoods only (a triangle view keyed by a vertex: the vertex's edges,
then its neighbours', two Spark rounds). A reader the rewrite refuses
(magic.Full) keeps the plain plan too, with the reason kept for `explain`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pomoview.dataflow.node import Fetch, Filters, Node
from pomoview.dataflow.operators.child import Child
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.source_slice import SourceSlice
from pomoview.dataflow.operators.wcoj import WcojJoin
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.builder.circuit_builder import CircuitBuilder
from pomoview.planner.demand.extend import Extension, extend, recursion_reached
from pomoview.planner.demand.magic import Full, Slice
from pomoview.planner.frontend import ast
from pomoview.planner.frontend.relations import CheckedProgram
from pomoview.planner.ir import ra
from pomoview.planner.ir.provenance import Keyed

ViewKey = tuple[str, tuple[str, ...]]
Gate = Callable[[Node, tuple[int, ...]], Node]
Step = Callable[[Mapping[str, ZSet[Row]]], object]


def _sources_read(extension: Extension, bases: list[str]) -> list[str]:
    """The base sources the extension's rules read whole: through an atom that binds none
    of their attributes, under a negation or an aggregate, or not sliced at all."""
    out: dict[str, None] = {}
    for name in extension.exprs:
        relation = extension.checked.relations.get(name)  # not a hidden one (`p@ind`)
        for rule in relation.rules if relation is not None else ():
            for lit in rule.body:
                atom = lit if isinstance(lit, ast.Atom) else getattr(lit, "atom", None)
                if isinstance(atom, ast.Atom) and atom.relation in bases:
                    out[atom.relation] = None
    return list(out)


def _mark_demand_driven(top: Node, demand_sources: set[str]) -> None:
    """Marks each Child and WcojJoin above `top` that reads a demand source (through any of
    its inputs) as demand-driven: it holds the demanded keys' rows only (Stats reports it
    partial). One of the program's own, read whole under a negation say, stays as it is."""
    reads: dict[int, bool] = {}  # id(node) -> whether it reads a demand source
    stack: list[tuple[Node, bool]] = [(top, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in reads:
            continue
        if not done:
            stack.append((node, True))
            stack.extend((i, False) for i in node.inputs if id(i) not in reads)
            continue
        found = isinstance(node, SourceIndex) and node.source in demand_sources
        reads[id(node)] = found or any(reads.get(id(i), False) for i in node.inputs)
        if isinstance(node, Child | WcojJoin) and reads[id(node)]:
            node.demand_driven = True


def _hold_none(source: str) -> bool:
    return False


class DemandedReaders:
    def __init__(
        self,
        checked: CheckedProgram,
        builder: CircuitBuilder,
        step: Step,
        hold_whole: Callable[[str], bool] = _hold_none,
    ) -> None:
        self._checked = checked  # the program with every extension so far
        self._builder = builder
        self._step = step  # a step between epochs (Graph.step_demand)
        self._hold_whole = hold_whole
        self._extensions: dict[ViewKey, Extension] = {}
        self.full: dict[ViewKey, str] = {}  # readers the rewrite would serve left plain, and why
        # reader -> base source -> "slice" or "whole", for the sources its rules read
        self.choices: dict[ViewKey, dict[str, str]] = {}
        self.sources: set[str] = set()  # demand sources and slices: answered here
        self.cyclic: set[ViewKey] = set()  # readers the rewrite serves for a cyclic body alone

    def plan(self, view: str, key: tuple[str, ...]) -> tuple[str, Gate] | None:
        """The relation to build the reader of `view` by `key` from, and its gate; None
        for the plain plan (see the module docstring)."""
        name = (view, key)
        if name in self.full:
            return None  # decided once per graph: a reader build that missed asks again
        extension = self._extensions.get(name)
        if extension is None:
            recursive = recursion_reached(self._checked, view) is not None
            if not key or not (recursive or self._reads_cyclic(view)):
                return None
            bases = [
                n for n, r in self._checked.relations.items() if r.kind == "source" and n not in self.sources
            ]
            sliced = [n for n in bases if not self._hold_whole(n)]
            found = extend(self._checked, view, key, sliced)
            if isinstance(found, Full):
                self.full[name] = found.reason
                return None
            if not recursive and not found.demanded.slices:
                # Every source the cyclic body reads is held whole: the plain plan's WcojJoin
                # holds the same indexes and answers a new key by a lookup path, where the
                # rewrite would take a step of the graph (bench/triangles.py, 200,000 edges:
                # 1.0 ms against 4.5 ms a cold vertex).
                self.full[name] = "a cyclic body whose sources are all held whole"
                return None
            extension = self._extensions[name] = found
            if not recursive:
                self.cyclic.add(name)
            self._checked = found.checked
            self._builder.extend(found.checked.relations, found.exprs)
            self.sources.add(found.demanded.demand)
            self.sources.update(piece.relation for piece in found.demanded.slices)
            read = _sources_read(found, bases)
            slices = {piece.source: "slice" for piece in found.demanded.slices}
            self.choices[name] = {n: "whole" for n in read} | slices
        demanded = extension.demanded
        # The demand source's attributes are the key's in the view's order.
        order = tuple(key.index(a) for a in demanded.key)

        def push(delta: ZSet[Row]) -> None:
            rows = ZSet([(tuple(k[i] for i in order), w) for k, w in delta.items()])
            self._step({demanded.demand: rows})

        def gate(parent: Node, cols: tuple[int, ...]) -> Node:
            slices = [self._slice(piece) for piece in demanded.slices]
            whole = tuple(n for n, how in self.choices[name].items() if how == "whole")
            node = DemandGate(parent, cols, demanded.demand, push, slices, whole)
            _mark_demand_driven(parent, self.sources)
            # Its rows are the view's, by key: what a recomputation from scratch checks.
            node.origin = Keyed(self._builder.exprs[view], None)
            return node

        return demanded.relation, gate

    def _reads_cyclic(self, view: str) -> bool:
        """Whether `view`'s plan, or a derived relation's it reads, has a MultiJoin."""
        exprs = self._builder.exprs
        seen: set[int] = set()
        stack: list[ra.Expr] = [exprs[view]] if view in exprs else []
        while stack:
            expr = stack.pop()
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            if isinstance(expr, ra.MultiJoin):
                return True
            if isinstance(expr, ra.Scan) and expr.relation in exprs:
                stack.append(exprs[expr.relation])
            stack.extend(ra.children(expr))
        return False

    def _slice(self, piece: Slice) -> SourceSlice:
        """The SourceSlice of `piece`, below its need relation's node (built full)."""
        need = self._builder.build(self._builder.exprs[piece.need], None)
        attributes = tuple(self._checked.relations[piece.source].attributes)
        return SourceSlice(need, piece.source, piece.relation, attributes, piece.key, self._step)

    def fetch(self, fetch: Fetch) -> Fetch:
        """`fetch`, answering the demand sources and slices (empty: see the module docstring)."""

        def demand_or(
            source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
        ) -> Iterable[Row] | None:
            return [] if source in self.sources else fetch(source, cols, keys, filters)

        return demand_or
