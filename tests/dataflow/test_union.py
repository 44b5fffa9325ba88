"""Union: the sum of its inputs; upqueries ask every input."""

from __future__ import annotations

from collections import Counter

from dataflow_harness import Driver, Store, epochs
from hypothesis import given, settings

from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b"), "s": ("a", "b")}
SETTINGS = settings(max_examples=80, deadline=None)


def reference(store: Store) -> ZSet:
    return ZSet(Counter(list(store.data["r"]) + list(store.data["s"])))


@SETTINGS
@given(epochs(("r", "s")))
def test_full(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = Union((store.index("r", (), False), store.index("s", (), False)))
    driver = Driver(store, node, reference)
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()


@SETTINGS
@given(epochs(("r", "s")))
def test_partial_inputs(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    # one input partial, the other full: the union answers from both
    node = Union((store.index("r", (0,), True), store.index("s", (), False)))
    driver = Driver(store, node, reference, key_cols=(0,))
    for batch, lookups in history[1:]:
        driver.step(batch)
        driver.fill(lookups)
        driver.check()


def test_same_row_from_both_inputs_has_weight_two() -> None:
    store = Store(SCHEMAS)
    store.data["r"].add((1, 1))
    store.data["s"].add((1, 1))
    node = Union((store.index("r", (), False), store.index("s", (), False)))
    driver = Driver(store, node, reference)
    assert driver.total == ZSet({(1, 1): 2})
    driver.step({"r": {(1, 1): -1}})
    assert driver.total == ZSet({(1, 1): 1})
