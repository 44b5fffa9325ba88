"""Child (PomoFlow §2.8.2): a nested circuit that runs to its own fixed point at every parent time.

At parent time p the child runs its circuit at (p, 0), (p, 1), … Its Import
nodes carry the parent's streams in (the Child's inputs are exactly the
parent nodes they import), its Feedback nodes carry each iteration's result
to the next, and its sinks are its outputs, read in the parent through
ChildOutput nodes. Two modes:

* "incremental" (the DBSP construction): imports are δ0, the streams inside
  are 2-D deltas, and the child is at rest when no feedback or delay holds
  anything and no operator has output due at a later iteration (JoinTrace and
  DistinctTrace may: see their docstrings). Iterations with nothing to do are
  skipped. An output's delta at p is the sum of its deltas over the iterations
  (Consolidate of the epoch's slice of its trace).
* "iterate" (the non-incremental reference): imports carry the parent's value
  at every iteration, feedbacks carry whole values, and the child stops when
  every feedback's value repeats; an output is its value at that iteration.

Contract: not linear. State: whatever its nodes keep, and, in incremental
mode, each output's accumulated value, so that the parent can upquery it (a
recursive result is full: DESIGN §3), held once (`OutputRows`): whole until it is upqueried
by columns, then in an index by those columns, kept from that upquery on (a reader filling
keys then reads those keys' rows, not every row the recursion holds). A child that does not reach a fixed
point within `max_iterations` raises, naming itself.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import FetchRequest, Node, StateSummary, Value, active, project
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.nested_wcoj import NestedWcoj
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import Trace
from pomoview.dataflow.zset import ZSet

Mode = Literal["incremental", "iterate"]


class FixedPointNotReached(RuntimeError):
    pass


class Child(Node):
    kind = "child"
    stateful = True

    def __init__(
        self,
        outputs: Sequence[Node],
        *,
        mode: Mode = "incremental",
        max_iterations: int = 100_000,
    ) -> None:
        self.circuit = Circuit(outputs)
        self.imports = [n for n in self.circuit.nodes if isinstance(n, Import)]
        super().__init__((), tuple(i.parent for i in self.imports))
        self.outputs = tuple(outputs)
        self.mode = mode
        self.max_iterations = max_iterations
        self.totals = [OutputRows() for _ in outputs]
        self.iterations = 0  # of the last run, for tests and benchmarks
        # Its inputs hold demanded keys only (planner/demand/readers.py marks it): it then
        # shrinks when demand is released, and Stats reports it as partial.
        self.demand_driven = False

    def output(self, index: int) -> ChildOutput:
        return ChildOutput(self, index)

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        if self.mode == "incremental":
            return self._run_incremental(inputs, time)
        return self._run_iterate(inputs, time)

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not any(active(v) for v in inputs) and time not in set(self.pending())

    def pending(self) -> Iterable[Time]:
        depth = len(self.global_id) if self.global_id else 1
        due: set[Time] = set()
        for node in self.circuit.nodes:
            for t in node.pending():
                due.add(t[:depth])
        return due

    def _external(self, inputs: Sequence[Value | None], first: bool) -> dict[int, Value | None]:
        if not first:
            return {}
        return {id(imp): inputs[port] for port, imp in enumerate(self.imports)}

    def _run_incremental(self, inputs: Sequence[Value | None], time: Time) -> tuple[ZSet[Row], ...]:
        deltas: list[ZSet[Row]] = [ZSet() for _ in self.outputs]
        iteration, runs = 0, 0
        while True:
            values = self.circuit.evaluate(time + (iteration,), self._external(inputs, iteration == 0))
            for k, node in enumerate(self.outputs):
                value = values.get(id(node))
                if active(value):
                    assert isinstance(value, ZSet)
                    deltas[k].extend(value)
            runs += 1
            if runs > self.max_iterations:
                raise FixedPointNotReached(f"child {self.global_id} ran {runs} iterations at {time}")
            if any(node.busy() for node in self.circuit.nodes):
                iteration += 1
                continue
            later = [
                t[len(time)]
                for node in self.circuit.nodes
                for t in node.pending()
                if t[: len(time)] == time and t[len(time)] > iteration
            ]
            if not later:
                break
            iteration = min(later)
        self.iterations = runs
        if len(time) == 1:
            # The root's epoch is over: its traces may settle it now, in the epoch's own
            # time, rather than in the first step of the next one.
            self.settle(time[0] + 1)
        for total, delta in zip(self.totals, deltas, strict=True):
            total.add(delta)
        return tuple(deltas)

    def settle(self, epoch: int) -> None:
        """Advances every trace of its circuit, nested circuits' too, to `epoch`: no time
        of an earlier root epoch will come."""
        for node in self.circuit.nodes:
            if isinstance(node, TraceAppend):
                node.settle(epoch)
            elif isinstance(node, Child):
                node.settle(epoch)

    def _run_iterate(self, inputs: Sequence[Value | None], time: Time) -> tuple[ZSet[Row], ...]:
        feedbacks = [n for n in self.circuit.nodes if isinstance(n, Feedback)]
        for feedback in feedbacks:
            feedback.reset()
        external = self._external(inputs, True)
        iteration = 0
        while True:
            values = self.circuit.evaluate(time + (iteration,), external)
            iteration += 1
            if all(f.stable() for f in feedbacks):
                break
            if iteration > self.max_iterations:
                raise FixedPointNotReached(f"child {self.global_id} ran {iteration} iterations at {time}")
        self.iterations = iteration
        out: list[ZSet[Row]] = []
        for node in self.outputs:
            value = values.get(id(node))
            out.append(value if isinstance(value, ZSet) else ZSet())
        self.totals = [OutputRows(value) for value in out]  # whole values: indexed again when asked
        for feedback in feedbacks:
            feedback.reset()
        return tuple(out)

    def hydrate(self) -> list[FetchRequest]:
        """Runs the imports' whole current contents through the child at time (0,) of the root."""
        inputs: list[Value | None] = [imp.parent.query((), [()]) for imp in self.imports]
        self.eval(inputs, (0,))
        return []

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("a child's outputs are read through ChildOutput nodes")

    def rows_of(self, output: int, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        """The rows of `output` whose `cols` hold one of `keys` (a new ZSet)."""
        return self.totals[output].rows_of(cols, keys)

    def state_summary(self) -> StateSummary:
        """Its outputs' totals, their indexes, the traces of its nodes and the indexes of its
        NestedWcojs (the recursion's state), as rows (a trace's or an index's entries count
        as rows) and sampled bytes."""
        rows = size = 0
        for total in self.totals:
            rows, size = rows + total.entries(), size + total.estimate_bytes()
        for node in self.circuit.nodes:
            trace = getattr(node, "trace", None)
            if isinstance(trace, Trace):
                rows += len(trace)
                size += trace.estimate_bytes()
            elif isinstance(node, NestedWcoj):  # its indexes, per iteration and outside
                nested = node.state_summary()
                rows, size = rows + nested.rows, size + nested.bytes
        return StateSummary((), self.demand_driven, len(self.totals), rows, size)

    def describe(self) -> str:
        demand = ", demand-driven" if self.demand_driven else ""
        # Its worst-case-optimal joins by name: `explain` shows no node inside a child.
        joins = "".join(f", {n.describe()}" for n in self.circuit.nodes if isinstance(n, NestedWcoj))
        return f"Child({self.mode}, {len(self.circuit.nodes)} nodes{demand}{joins})"


class ChildOutput(Node):
    """One output of a Child, as a stream of the parent circuit (linear, stateless)."""

    def __init__(self, child: Child, index: int) -> None:
        super().__init__(child.outputs[index].schema, (child,))
        self.index = index

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        value = inputs[0]
        assert isinstance(value, tuple)
        return value[self.index]

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        child = self.inputs[0]
        assert isinstance(child, Child)
        return child.rows_of(self.index, cols, keys)

    def describe(self) -> str:
        return f"ChildOutput({self.index})"


class OutputRows:
    """One output's accumulated value, its rows held once: as a ZSet until the first upquery
    by columns, then in the index by those columns alone (a second index is made from the
    first). The index was a copy beside the ZSet before: one more dict entry per row of a
    demanded closure.

    Invariant (asserted in `check`): exactly one of the ZSet and the indexes holds the rows,
    and every index holds the same (row, weight) entries.
    """

    __slots__ = ("whole", "indexes")

    def __init__(self, whole: ZSet[Row] | None = None) -> None:
        self.whole: ZSet[Row] | None = ZSet() if whole is None else whole
        self.indexes: dict[tuple[int, ...], dict[Key, dict[Row, int]]] = {}

    def add(self, delta: ZSet[Row]) -> None:
        if self.whole is not None:
            self.whole.extend(delta)
        for cols, index in self.indexes.items():
            _index_add(index, cols, delta)

    def value(self) -> ZSet[Row]:
        """Every row with its weight (a new ZSet)."""
        if self.whole is not None:
            return self.whole + ZSet()
        index = next(iter(self.indexes.values()))
        return ZSet.of_weights({row: w for group in index.values() for row, w in group.items()})

    def rows_of(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        """The rows whose `cols` hold one of `keys` (a new ZSet)."""
        if not cols:
            return self.value()
        index = self.indexes.get(cols)
        if index is None:
            index = {}
            _index_add(index, cols, self.whole if self.whole is not None else self.value())
            self.indexes[cols] = index
            self.whole = None  # held by the index from now on
        out: ZSet[Row] = ZSet()
        for key in set(keys):
            for row, weight in index.get(key, {}).items():
                out.add(row, weight)
        return out

    def __len__(self) -> int:
        """The number of rows."""
        if self.whole is not None:
            return len(self.whole)
        return sum(len(group) for group in next(iter(self.indexes.values())).values())

    def entries(self) -> int:
        """The entries held: the ZSet's rows, or every index's."""
        if self.whole is not None:
            return len(self.whole)
        return sum(sum(len(group) for group in index.values()) for index in self.indexes.values())

    def estimate_bytes(self) -> int:
        if self.whole is not None:
            return _rows_bytes(self.whole.items(), len(self.whole))
        size = 0
        for index in self.indexes.values():
            entries = sum(len(group) for group in index.values())
            size += sys.getsizeof(index) + _groups_bytes(index, entries)
        # The rows themselves, once (every index holds the same row objects).
        first = next(iter(self.indexes.values()))
        items = (item for group in first.values() for item in group.items())
        return size + _rows_bytes(items, len(self)) - len(self) * _ENTRY

    def check(self) -> None:
        assert (self.whole is None) == bool(self.indexes), "rows held by the ZSet or by the indexes"
        held = [{row: w for group in ix.values() for row, w in group.items()} for ix in self.indexes.values()]
        assert all(h == held[0] for h in held), "every index holds the same rows"


def _index_add(index: dict[Key, dict[Row, int]], cols: tuple[int, ...], delta: ZSet[Row]) -> None:
    for row, weight in delta.items():
        key = project(row, cols)
        group = index.setdefault(key, {})
        total = group.get(row, 0) + weight
        if total:
            group[row] = total
        else:
            del group[row]
            if not group:
                del index[key]


def _rows_bytes(items: Iterable[tuple[Row, int]], count: int, sample: int = 64) -> int:
    """The bytes of `count` (row, weight) dict entries, sized from the first `sample`."""
    seen = sampled = 0
    for row, _ in itertools.islice(items, sample):
        sampled += 1
        seen += sys.getsizeof(row) + sum(sys.getsizeof(v) for v in row) + _ENTRY
    return seen * count // sampled if sampled else 0


def _groups_bytes(index: dict[Key, dict[Row, int]], entries: int, sample: int = 64) -> int:
    """An index's groups: each dict, and its entries (rows shared with the totals)."""
    groups = list(itertools.islice(index.values(), sample))
    if not groups:
        return 0
    return sum(sys.getsizeof(g) for g in groups) * len(index) // len(groups) + entries * _ENTRY


_ENTRY = 24  # a dict entry: its hash, key and value (weights are small ints, shared)
