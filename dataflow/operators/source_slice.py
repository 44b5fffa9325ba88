"""SourceSlice: the part of a base relation that demanded rules read, fetched by demand.

The demand transformation (planner/demand/magic.py, "Slices") reads a large source inside
demanded rules through a slice: a source of its own (`relation`, e.g. `edge__bf`) holding
the base source's rows whose key (the attributes the rules bind, e.g. `x`) is among the
rows of the need relation (`n__edge__bf`), which the same rules compute from the demand.
This node sits below the need relation and keeps the slice in step with it: the keys the
recursion newly needs are fetched together (one keyed fetch for all of them, so a
demanded closure costs one round per level of its depth, not one per key) and inserted
into the slice, which is an ordinary insertion the recursion derives from, and so on until
the need is met.

Contract:
- Input: the need relation's delta (its rows are keys: weight +1 needed, -1 no longer),
  and at build what it holds already (a constant in a rule can need keys before any key
  is demanded).
  Output: none (the gate that waits on this slice reads no rows from it).
- Not linear. State: `needed`, the keys the need relation holds; `fetched`, the base rows of
  each fetched key (kept in step with the base source's writes by `forward`); `unmet`,
  needed keys not fetched. Invariant (`check`): nothing is unmet while a key no
  subscription pins is present below a gate, unless that gate is filling (a lookup
  between its rounds): a write that makes a key unmet is followed by the eviction of the
  gates' keys (dataflow/graph.py, `Graph.step`), and a pinned key's answer waits for the
  next fill through its gate.
- Missing key: `fill_step` fetches every unmet key in one request through `fetch` and
  pushes their rows into the slice (a step of the graph, between epochs); while the fetch
  is not at hand it yields a Miss (the walk parks there and resumes at its next round).
  A write of the base source for a key not fetched is dropped here (`forward`): the store
  keeps it, and a later need fetches it.
- Eviction: `trim` retracts the rows of fetched keys no longer needed (one step), after the
  gates above released their demand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pomoview.dataflow.node import Fetch, FetchRequest, KeyedNode, Node, StateSummary, group_by_key, project
from pomoview.dataflow.state.keyed_state import Key, KeyedState, Row, RowLayout
from pomoview.dataflow.upquery import Miss, Upquery, fetches_allowed
from pomoview.dataflow.zset import ZSet

# Steps the graph with these changes of the slice relation (between epochs).
Push = Callable[[Mapping[str, ZSet[Row]]], object]


class SourceSlice(Node):
    def __init__(
        self,
        need: Node,
        source: str,
        relation: str,
        attributes: tuple[str, ...],
        key: tuple[str, ...],
        push: Push,
    ) -> None:
        super().__init__((), (need,))
        self.source = source  # the base source
        self.relation = relation  # the slice's own source, which the demanded rules read
        self.attributes = attributes
        self.key = key
        self.key_cols = tuple(attributes.index(a) for a in key)
        self._need_cols = tuple(need.schema.index(a) for a in key)  # the key from a need row
        self.push = push
        self.fetch: Fetch | None = None  # set by the circuit
        self.needed: set[Key] = set()
        # The fetched keys' rows, as a source index holds them (one int column besides the
        # key: an IntSet per large group).
        layout = (
            RowLayout(self.key_cols, len(attributes))
            if RowLayout.fits(self.key_cols, len(attributes))
            else None
        )
        self.fetched = KeyedState(partial=True, layout=layout)
        self.unmet: set[Key] = set()
        self.grew = False  # a key became unmet since Graph.step reset it
        self.gates: list[Node] = []  # the DemandGates that wait on this slice

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        cols = self._need_cols
        for row, weight in delta.items():
            key = project(row, cols)
            if weight > 0:
                self.needed.add(key)
                if not self.fetched.is_present(key):
                    self.unmet.add(key)
                    self.grew = True
            else:
                self.needed.discard(key)
                self.unmet.discard(key)
        return ZSet()

    @property
    def needs_hydrate(self) -> bool:
        return True

    def hydrate(self) -> list[FetchRequest]:
        """Takes what the need relation holds at build: a rule's constants (a fact the
        demand reaches) may need keys before any key is demanded."""
        self.on_delta(0, self.inputs[0].query((), [()]))
        return []

    def forward(self, delta: ZSet[Row]) -> ZSet[Row]:
        """The exact change a write of the base source makes to the slice (its operations
        on fetched keys, as SourceIndex.on_delta takes them); the others are dropped here."""
        by_key: dict[Key, list[tuple[Row, int]]] = {}
        cols = self.key_cols
        for row, op in delta.items():
            by_key.setdefault(project(row, cols), []).append((row, op))
        weights: dict[Row, int] = {}
        for key, ops in by_key.items():
            changed = self.fetched.set_presence(key, ops)
            if changed is None:
                self.metrics.dropped += len(ops)
            else:
                weights.update(changed)
        return ZSet.of_weights(weights)

    def fill_step(self) -> Upquery[None]:
        """Fetches every unmet key in one request and pushes their rows into the slice
        (see the module docstring); yields a Miss while that fetch is not at hand."""
        while True:
            keys = sorted(self.unmet, key=repr)  # again after a round: a write may have changed them
            if not keys:
                return
            assert self.fetch is not None, f"{self.describe()} has no fetch"
            got = self.fetch(self.source, self.key, keys, ()) if fetches_allowed() else None
            if got is not None:
                break
            yield Miss(FetchRequest(self.source, self.key, tuple(keys), ()))
        self.metrics.fetches += 1
        self.metrics.filled_keys += len(keys)
        rows: ZSet[Row] = ZSet()
        for key, group in group_by_key(((tuple(row), 1) for row in got), self.key_cols, keys).items():
            self.fetched.fill(key, group)
            for row, weight in group:
                rows.add(row, weight)
        self.unmet.difference_update(keys)
        if rows:
            self.push({self.relation: rows})

    def trim(self) -> int:
        """Retracts the rows of the fetched keys no longer needed; returns how many keys."""
        gone = [k for k in self.fetched.keys() if k not in self.needed]
        rows: ZSet[Row] = ZSet()
        for key in gone:
            for row, weight in (self.fetched.get(key) or {}).items():
                rows.add(row, -weight)
            self.fetched.evict(key)
        if rows:
            self.push({self.relation: rows})
        self.metrics.evictions += len(gone)
        return len(gone)

    def check(self) -> None:
        # Keys unmet are allowed while a gate fills, or when no answer can lack their rows:
        # no key is present below the gates but pinned ones (a write's eviction leaves those).
        excused = all(getattr(gate, "filling", None) or not _unpinned_below(gate) for gate in self.gates)
        assert not self.unmet or excused, (
            f"{self.describe()}: {sorted(self.unmet, key=repr)[:3]} needed, not fetched, no fill under way"
        )

    def state_summary(self) -> StateSummary:
        state = self.fetched
        return StateSummary(self.key, True, state.present_keys(), state.row_count(), state.estimate_bytes())

    def describe(self) -> str:
        return (
            f"SourceSlice({self.source} by {self.key} as {self.relation}, "
            f"{self.fetched.present_keys()} fetched, {len(self.needed)} needed)"
        )


def _unpinned_below(gate: Node) -> bool:
    """Whether a state below the gate holds a key no subscription pins."""
    return any(
        isinstance(c, KeyedNode) and c.state.present_keys() > len(c.state.pinned) for c, _ in gate.consumers
    )
