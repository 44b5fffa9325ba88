"""DemandGate: a key's first lookup demands it (a step of the demand source), an eviction
below releases it, and the guarded relation above holds the demanded keys' rows only.

The circuit is the demand pattern by hand: `guarded(k, v) :- demand(k), r(k, v)`, full,
read by k through the gate; the reference is r recomputed from scratch."""

from __future__ import annotations

from dataflow_harness import Store, epochs
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.graph import Graph
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.join import Join
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("k", "v"), "demand": ("k",)}


def build(store: Store) -> tuple[Graph[str], DemandGate, Join]:
    graph: Graph[str] = Graph()
    # The left row and the right's other columns: (k, v).
    guarded = Join(store.index("demand", (), False), store.index("r", (), False), (0,), (0,), partial=False)

    def push(delta: ZSet) -> None:
        graph.step({"demand": delta})

    gate = DemandGate(guarded, (0,), "demand", push)
    assert graph.add("v", "v", Reader(gate, (0,), partial=True), store.fetch) == []
    return graph, gate, guarded


def rows_of(store: Store, keys: set) -> set:
    return {row for row in store.data["r"] if (row[0],) in keys}


@settings(max_examples=60, deadline=None)
@given(history=epochs(("r",)), data=st.data())
def test_demand_follows_lookups_and_evictions(history: list, data: st.DataObject) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    graph, gate, guarded = build(store)
    reader = graph.readers["v"]
    for batch, _ in history[1:]:
        graph.step(store.apply({"r": batch["r"]}))
        keys = data.draw(st.lists(st.tuples(st.integers(0, 2)), max_size=3))
        for key, got in zip(keys, graph.lookup("v", keys), strict=True):
            assert set(got) == rows_of(store, {key})
        if data.draw(st.booleans()):
            graph.evict(1 << 40)  # everything below goes, and then its demand
        graph.check_invariants()
        present = set(reader.state.keys())
        assert gate.demanded == present
        # The guarded relation holds the rows of the demanded keys, and no other.
        assert set(dict(guarded.query((), [()]).items())) == rows_of(store, present)
        for key in present:
            assert set(reader.state.get(key) or {}) == rows_of(store, {key})


def test_a_demanded_key_pushes_once_and_release_retracts_it() -> None:
    store = Store(SCHEMAS)
    store.apply({"r": {(1, 10): 1, (1, 11): 1, (2, 20): 1}})
    graph, gate, guarded = build(store)
    assert set(graph.lookup("v", [(1,)])[0]) == {(1, 10), (1, 11)}
    epoch = graph.epoch
    assert set(graph.lookup("v", [(1,)])[0]) == {(1, 10), (1, 11)}
    assert graph.epoch == epoch, "a present key demanded again"
    assert gate.metrics.filled_keys == 1
    assert graph.release_demand() == 0, "a key still held below was released"
    graph.readers["v"].evict_own([(1,)])
    assert graph.release_demand() == 1
    assert gate.demanded == set() and set(dict(guarded.query((), [()]).items())) == set()
    assert set(graph.lookup("v", [(2,)])[0]) == {(2, 20)} and gate.demanded == {(2,)}
