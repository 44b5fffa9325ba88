"""SourceIndex: exact set deltas from insert/delete operations; partial fill on miss."""

from __future__ import annotations

from dataflow_harness import Driver, Store, epochs, touches_missing
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b")}
SETTINGS = settings(max_examples=80, deadline=None)


def reference(store: Store) -> ZSet:
    return ZSet({row: 1 for row in store.data["r"]})


def test_insert_of_present_and_delete_of_absent_are_nothing() -> None:
    store = Store(SCHEMAS)
    index = store.index("r", (0,), fetch_partial=False)
    index.hydrate()
    assert index.on_delta(0, ZSet({(1, 1): 1})) == ZSet({(1, 1): 1})
    assert index.on_delta(0, ZSet({(1, 1): 1})) == ZSet()  # present: no-op
    assert index.on_delta(0, ZSet({(2, 2): -1})) == ZSet()  # absent: no-op
    assert index.on_delta(0, ZSet({(1, 1): -1, (1, 2): 1})) == ZSet({(1, 1): -1, (1, 2): 1})
    assert index.on_delta(0, ZSet({(1, 1): -1})) == ZSet()
    assert index.query((0,), [(1,)]) == ZSet({(1, 2): 1})
    assert index.query((1,), [(2,), (9,)]) == ZSet({(1, 2): 1})
    assert index.metrics.dropped == 0


def test_partial_drops_missing_and_fetches_once() -> None:
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 1), (1, 2), (2, 1)}
    index = store.index("r", (0,), fetch_partial=True)
    index.hydrate()  # a partial index loads nothing
    assert store.fetches == []
    assert index.on_delta(0, ZSet({(1, 3): 1})) == ZSet()  # key (1,) missing: dropped
    assert index.metrics.dropped == 1
    store.data["r"].add((1, 3))
    assert index.query((0,), [(1,), (1,), (3,)]) == ZSet({(1, 1): 1, (1, 2): 1, (1, 3): 1})
    assert store.fetches == [("r", ("a",), [(1,), (3,)])]
    # present keys are answered from state, missing ones only are fetched
    assert index.query((0,), [(1,)]) == ZSet({(1, 1): 1, (1, 2): 1, (1, 3): 1})
    assert len(store.fetches) == 1
    # present-but-empty key (3,): deltas apply, no drop
    assert index.on_delta(0, ZSet({(3, 0): 1, (1, 1): 1, (1, 2): -1})) == ZSet({(3, 0): 1, (1, 2): -1})
    assert index.metrics.dropped == 1
    assert index.on_delta(0, ZSet({(2, 5): -1, (0, 0): 1})) == ZSet()
    assert index.metrics.dropped == 3


@SETTINGS
@given(epochs(("r",)), st.booleans())
def test_random_batches_full(history: list, by_second: bool) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    driver = Driver(store, store.index("r", (1,) if by_second else (0,), False), reference)
    driver.check()
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
        # the output delta is exactly the set difference
        assert all(w in (1, -1) for d in driver.sink.deltas for _, w in d.items())
    assert driver.dropped == 0


@SETTINGS
@given(epochs(("r",)))
def test_random_batches_partial(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    index = store.index("r", (0,), True)
    driver = Driver(store, index, reference, key_cols=(0,))
    for batch, lookups in history[1:]:
        dropped = driver.dropped
        missing = touches_missing(batch, {"r": (0,)}, driver.filled)
        driver.step(batch)
        assert (driver.dropped > dropped) == missing
        driver.fill(lookups)
        driver.check()
