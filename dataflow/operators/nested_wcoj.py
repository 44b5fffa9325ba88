"""NestedWcoj: a worst-case-optimal join inside a recursion, over one recursive atom and
atoms of relations outside the loop (planner/ir/cyclic.py's MultiJoin through the recursion).

Inside a root child circuit the streams are 2-D deltas at (epoch, iteration); the atoms read
from outside (Imports) change at iteration 0 only. With one recursive atom R the join is
linear in R, so with R_k the sum of R's deltas at iteration k over the epochs before this
one, and ΔE this epoch's change of the other atoms' relations, the nested delta is

    out(e, k) = δR(e, k) ⋈ E(e)  +  R_k ⋈ (E(e) − E(e−1))

(DBSP's four corners of (e, k), each product taken at the lub of its factors' times). The
first term is the join's update path from R's atom over the current indexes of E; the
second the delta query of E's changes with R_k held still, which is known at (e, 0) and
held back until iteration k (`due`), as JoinTrace's products at later iterations are.

Contract:
- Linear in R, not in E (a delta query). Inputs: ZSets, R's at any iteration, the others'
  at iteration 0 only (asserted). Output: the join's rows (its variables), 2-D deltas.
- State: one WcojJoin (dataflow/operators/wcoj.py) per iteration k that R ever changed at,
  each holding R_k's indexes, all sharing E's indexes through one IndexRegistry; and `due`,
  the outputs of later iterations of the current epoch. Full: every state is whole.
- Missing key: none (full); an upquery is refused, as for every node inside a child.
- Root child only (times of two coordinates): a deeper nesting keeps binary joins.

Invariant (asserted in `check`): after each eval, every join's E indexes are one set of
objects (the registry's), and the join of iteration 0 exists (it applies E's changes when
no other join reads them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from pomoview.dataflow.node import Node, StateSummary, Value, active
from pomoview.dataflow.operators.wcoj import WcojJoin
from pomoview.dataflow.state.collection_index import IndexRegistry
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet

# Makes the body's WcojJoin over these inputs, its indexes from this registry.
MakeJoin = Callable[[tuple[Node, ...], IndexRegistry], WcojJoin]


class _Iteration(Node):
    """Stands for R at one iteration: the key under which the registry holds R_k's indexes."""

    def __init__(self, schema: tuple[str, ...]) -> None:
        super().__init__(schema, ())


class NestedWcoj(Node):
    stateful = True

    def __init__(self, inputs: tuple[Node, ...], recursive: int, join: MakeJoin) -> None:
        """`inputs[recursive]` is R's stream; each other input is read from outside the loop
        (an input read by several atoms is one node, indexed once). `join(inputs, indexes)`
        makes the WcojJoin of the body over those inputs, its indexes from `indexes`."""
        assert sum(node is inputs[recursive] for node in inputs) == 1, "one recursive atom"
        super().__init__((), inputs)
        self.make = join
        self.recursive = recursive
        self.registry = IndexRegistry()
        self.joins: dict[int, WcojJoin] = {}
        self._slots: dict[int, _Iteration] = {}  # held: the registry keys R_k weakly by its slot
        self.due: dict[Time, ZSet[Row]] = {}
        self.schema = self._join(0).schema  # the body's variables

    def _join(self, k: int) -> WcojJoin:
        """The join whose R is R_k (made empty at the first delta of iteration k)."""
        join = self.joins.get(k)
        if join is None:
            slot = self._slots[k] = _Iteration(self.inputs[self.recursive].schema)
            ins = tuple(slot if p == self.recursive else node for p, node in enumerate(self.inputs))
            join = self.joins[k] = self.make(ins, self.registry)
        return join

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        assert len(time) == 2, f"{self.describe()} runs in a root child only, not at {time}"
        epoch, k = time
        out = self.due.pop(time, None) or ZSet()
        outside: list[ZSet[Row] | None] = [
            v if p != self.recursive and isinstance(v, ZSet) and active(v) else None
            for p, v in enumerate(inputs)
        ]
        if any(v is not None for v in outside):
            assert k == 0, f"{self.describe()}: an input from outside changed at iteration {k}"
            # R_j ⋈ ΔE for every j, before R's deltas of this epoch join the R_j: the joins
            # share E's step (the first applies it; those after read E before it as the
            # indexes minus it), and the join of iteration 0 always runs, so it is applied.
            stamp = (epoch, "outside")
            ran = False
            for j, join in sorted(self.joins.items()):
                if not self._holds(join):
                    continue  # R_j is empty: so is R_j ⋈ ΔE (a hydration's first step)
                got = join.step(outside, stamp)
                ran = True
                if got:
                    (out if j == 0 else self.due.setdefault((epoch, j), ZSet())).extend(got)
            if not ran:
                self._apply(outside)
        delta = inputs[self.recursive]
        if active(delta):
            ins = [delta if p == self.recursive else None for p in range(len(inputs))]
            out.extend(self._join(k).step(ins, (epoch, k, "recursion")))  # δR(e, k) ⋈ E(e); R_k += δR
        return ZSet.of_weights({row: w for row, w in out.items() if w})

    def _holds(self, join: WcojJoin) -> bool:
        """Whether the join's R_k holds a row."""
        relation = join.relations[join.relation_of[self.recursive]]
        return any(index.size for index in relation.indexes.values())

    def _apply(self, outside: Sequence[ZSet[Row] | None]) -> None:
        """E's changes applied to its indexes, when no join's step did (each relation once)."""
        join = self.joins[0]
        done: set[int] = set()
        for port, delta in enumerate(outside):
            r = join.relation_of[port]
            if delta is not None and r not in done:
                done.add(r)
                join.relations[r].add(delta)

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not any(active(v) for v in inputs) and time not in self.due

    def pending(self) -> Iterable[Time]:
        return self.due.keys()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("a nested join emits 2-D deltas; query the child circuit's output")

    def check(self) -> None:
        assert 0 in self.joins, "the join of iteration 0 applies E's changes"
        first = self.joins[0]
        for join in self.joins.values():
            for p in range(len(self.inputs)):
                if p != self.recursive:
                    assert join.relations[join.relation_of[p]] is first.relations[first.relation_of[p]]

    def state_summary(self) -> StateSummary:
        summaries = [join.state_summary() for join in self.joins.values()]
        return StateSummary(
            (),
            False,
            sum(s.present_keys for s in summaries),
            sum(s.rows for s in summaries),
            sum(s.bytes for s in summaries),
        )

    def describe(self) -> str:
        inner = self.joins[0].describe().removeprefix("WcojJoin(").removesuffix(")")
        return f"NestedWcoj({inner}; {len(self.joins)} iterations)"
