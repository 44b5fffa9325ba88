"""Filter: linear and stateless; upqueries pass through; vs a from-scratch filter."""

from __future__ import annotations

from dataflow_harness import Driver, Store, epochs
from hypothesis import given, settings

from pomoview.dataflow.operators.filter import Filter
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b")}
SETTINGS = settings(max_examples=80, deadline=None)


def keep(row: tuple) -> bool:
    return row[0] <= row[1]


def reference(store: Store) -> ZSet:
    return ZSet({row: 1 for row in store.data["r"] if keep(row)})


@SETTINGS
@given(epochs(("r",)))
def test_full(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    driver = Driver(store, Filter(store.index("r", (), False), keep, "a <= b"), reference)
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()


@SETTINGS
@given(epochs(("r",)))
def test_partial_source_below(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = Filter(store.index("r", (0,), True), keep)
    driver = Driver(store, node, reference, key_cols=(0,))
    for batch, lookups in history[1:]:
        driver.step(batch)
        driver.fill(lookups)
        driver.check()


def test_linear_on_weights() -> None:
    f = Filter(Store(SCHEMAS).index("r", (), False), keep)
    delta = ZSet({(1, 2): 3, (2, 1): -1, (0, 0): -2})
    assert f.on_delta(0, delta) == ZSet({(1, 2): 3, (0, 0): -2})
    assert f.describe().startswith("Filter")
