"""SourceSlice: the rows of a base relation r for the keys a need relation holds, fetched by
demand, kept in step with r's writes, and dropped when no longer needed.

The circuit by hand: the need relation is the demand source itself (`need(k)`), the slice
`s` a full source index that only the slice's pushes write, read by k through a DemandGate
waiting on the slice. The reference is r recomputed from scratch: after every write,
lookup and eviction, s holds exactly r's rows of the demanded keys (or the needed keys
fetched so far, once more)."""

from __future__ import annotations

from dataflow_harness import Store, epochs
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.graph import Graph
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.source_slice import SourceSlice
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("k", "v"), "need": ("k",), "s": ("k", "v")}


def build(store: Store) -> tuple[Graph[str], DemandGate, SourceSlice, SourceIndex]:
    graph: Graph[str] = Graph()
    need = store.index("need", (), False)
    held = store.index("s", (), False)
    piece = SourceSlice(need, "r", "s", ("k", "v"), ("k",), graph.step_demand)

    def push(delta: ZSet) -> None:
        graph.step_demand({"need": delta})

    gate = DemandGate(held, (0,), "need", push, [piece])

    def fetch(source: str, names: tuple[str, ...], keys: list, filters: tuple = ()) -> list:
        # The need and the slice are the graph's own (empty at build), r is the store's.
        return store.fetch(source, names, keys, filters) if source == "r" else []

    assert graph.add("v", "v", Reader(gate, (0,), partial=True), fetch) == []
    return graph, gate, piece, held


def rows_of(store: Store, keys: set) -> set:
    return {row for row in store.data["r"] if (row[0],) in keys}


@settings(max_examples=60, deadline=None)
@given(history=epochs(("r",)), data=st.data())
def test_the_slice_holds_the_needed_rows_of_r(history: list, data: st.DataObject) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    graph, gate, piece, held = build(store)
    reader = graph.readers["v"]
    for batch, _ in history[1:]:
        graph.step(store.apply({"r": batch["r"]}))
        keys = data.draw(st.lists(st.tuples(st.integers(0, 2)), max_size=3))
        for key, got in zip(keys, graph.lookup("v", keys), strict=True):
            assert set(got) == rows_of(store, {key})
        if data.draw(st.booleans()):
            graph.evict(1 << 40)
        graph.check_invariants()
        present = set(reader.state.keys())
        assert gate.demanded == present == piece.needed
        assert set(piece.fetched.keys()) == present and not piece.unmet
        # The slice's own source holds r's rows of the needed keys, and no other.
        assert set(dict(held.query((), [()]).items())) == rows_of(store, present)
        for key in present:
            assert set(reader.state.get(key) or {}) == rows_of(store, {key})
