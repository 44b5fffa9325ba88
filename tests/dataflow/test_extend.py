"""Extend: a computed column appended; upqueries pass through unless they ask for it."""

from __future__ import annotations

from dataflow_harness import Driver, Store, epochs
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.operators.extend import Extend
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b")}
SETTINGS = settings(max_examples=40, deadline=None)


def fn(row: tuple) -> object:
    return f"{row[0]}-{row[1]}"


def reference(store: Store) -> ZSet:
    return ZSet({row + (fn(row),): 1 for row in store.data["r"]})


@SETTINGS
@given(history=epochs(("r",)))
def test_full_extend(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    driver = Driver(store, Extend(store.index("r", (), False), "k", fn), reference)
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()


@SETTINGS
@given(history=epochs(("r",)), data=st.data())
def test_partial_input_by_a_copied_column(history: list, data: st.DataObject) -> None:
    """Keyed by a copied column, the upquery reaches the partial source unchanged."""
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    driver = Driver(store, Extend(store.index("r", (0,), True), "k", fn), reference, key_cols=(0,))
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.fill(data.draw(st.lists(st.tuples(st.integers(0, 2)), max_size=2)))
        driver.check()


def test_query_by_the_computed_column_scans_a_full_input() -> None:
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 2), (2, 1)}
    node = Extend(store.index("r", (), False), "k", fn)
    Driver(store, node, reference)  # hydrates
    assert node.query((2,), [("2-1",)]) == ZSet({(2, 1, "2-1"): 1})
    assert node.query((2,), [("9-9",)]) == ZSet()
