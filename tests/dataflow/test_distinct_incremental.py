"""Distinct: multiset stream -> set stream; full and partial, vs a from-scratch set."""

from __future__ import annotations

from dataflow_harness import Driver, Store, epochs, touches_missing
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.operators.distinct_incremental import DistinctIncremental
from pomoview.dataflow.operators.map import Column, Map
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b"), "s": ("a", "b")}
SETTINGS = settings(max_examples=80, deadline=None)


def reference(store: Store) -> ZSet:
    # the distinct first column of r ∪ s, paired with itself... kept simple: rows (a,)
    return ZSet({(row[0],): 1 for row in store.data["r"] | store.data["s"]})


def _multiset(store: Store, partial: bool) -> Union:
    # r.a ∪ s.a projected: weights count how many tuples derive each (a,)
    keys = (0,) if partial else ()
    return Union(
        (
            Map(store.index("r", keys, partial), ("a",), [Column(0)]),
            Map(store.index("s", keys, partial), ("a",), [Column(0)]),
        )
    )


@SETTINGS
@given(epochs(("r", "s")), st.booleans())
def test_full(history: list, keyed: bool) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = DistinctIncremental(_multiset(store, False), (0,) if keyed else (), partial=False)
    driver = Driver(store, node, reference)
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
        for delta in driver.sink.deltas:
            assert all(w in (1, -1) for _, w in delta.items())


@SETTINGS
@given(epochs(("r", "s")))
def test_partial(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = DistinctIncremental(_multiset(store, True), (0,), partial=True)
    driver = Driver(store, node, reference, key_cols=(0,))
    for batch, lookups in history[1:]:
        dropped = driver.dropped
        expect = touches_missing(batch, {"r": (0,), "s": (0,)}, driver.filled)
        driver.step(batch)
        assert (driver.dropped > dropped) == expect
        driver.fill(lookups)
        driver.check()


@SETTINGS
@given(epochs(("r", "s")))
def test_partial_over_full_input_drops_at_distinct(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = DistinctIncremental(_multiset(store, False), (0,), partial=True)
    driver = Driver(store, node, reference, key_cols=(0,))
    for batch, lookups in history[1:]:
        dropped = driver.dropped
        net: ZSet = ZSet()  # the multiset delta that reaches the distinct
        for src, ops in batch.items():
            for row, op in ops.items():
                if (row in store.data[src]) != (op > 0):
                    net.add((row[0],), op)
        driver.step(batch)
        assert (driver.dropped > dropped) == any(k not in driver.filled for k in net.elements())
        driver.fill(lookups)
        driver.check()
